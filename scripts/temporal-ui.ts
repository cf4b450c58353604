import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Headless Chromium (Debian's `chromium` package) as the user's browser. */
export function findChromium(): string {
  for (const c of [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean) as string[]) {
    if (fs.existsSync(c)) return c;
  }
  throw new Error('Chromium not found: apt-get install -y chromium (or set CHROMIUM to its binary)');
}

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--window-size=1400,900',
  '--virtual-time-budget=10000',
];

export const flowUiUrl = (ui: string, namespace: string, flow: string): string =>
  `${ui}/namespaces/${namespace}/workflows?query=${encodeURIComponent(`KafkaFlow="${flow}"`)}`;

/** The Temporal UI's workflow list for one flow, rendered in a real browser: its HTML. */
export async function renderedWorkflowList(url: string): Promise<string> {
  const userDir = fs.mkdtempSync('/tmp/kft-chromium-');
  try {
    const { stdout } = await run(findChromium(), [...FLAGS, `--user-data-dir=${userDir}`, '--dump-dom', url], {
      maxBuffer: 64 * 1024 * 1024,
      timeout: 60_000,
    });
    return stdout;
  } finally {
    fs.rmSync(userDir, { recursive: true, force: true });
  }
}

export async function screenshot(url: string, file: string): Promise<void> {
  const userDir = fs.mkdtempSync('/tmp/kft-chromium-');
  try {
    await run(findChromium(), [...FLAGS, `--user-data-dir=${userDir}`, `--screenshot=${file}`, url], { timeout: 60_000 });
  } finally {
    fs.rmSync(userDir, { recursive: true, force: true });
  }
}
