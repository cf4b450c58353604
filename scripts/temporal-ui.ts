import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type { Readable, Writable } from 'node:stream';

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
  '--window-size=1600,900',
];

export const flowUiUrl = (ui: string, namespace: string, flow: string): string =>
  `${ui}/namespaces/${namespace}/workflows?query=${encodeURIComponent(`KafkaFlow="${flow}"`)}`;

/**
 * The columns of the Temporal UI's workflow list that show a partition at a glance: the UI keeps
 * its column set-up per browser and namespace in localStorage (`namespace-workflow-table-columns`),
 * where "Configure columns" puts it (README, *Operations*).
 */
export const FLOW_COLUMNS = ['Status', 'Workflow ID', 'KafkaFlowPhase', 'KafkaGeneration', 'KafkaLag', 'KafkaKeys', 'KafkaOwner', 'Start'];

/** The localStorage entry that sets the workflow list's columns of `namespace` to FLOW_COLUMNS. */
export const flowColumnsStorage = (namespace: string): Record<string, string> => ({
  'namespace-workflow-table-columns': JSON.stringify({ [namespace]: FLOW_COLUMNS.map((label) => ({ label })) }),
});

export interface PageOptions {
  /** Entries set in localStorage before the page's own scripts run (the UI's column set-up lives there). */
  readonly localStorage?: Record<string, string>;
  /** The page's text (with its same-origin frames') is read again every 500 ms until this holds (the UI renders after its API calls). */
  readonly until?: (text: string) => boolean;
  /**
   * While `until` does not hold the page is loaded again after this long (default 5 s), then after
   * twice as long each time, up to 30 s: the UI's workflow list shows the search attributes of when
   * it was loaded and does not refresh them.
   */
  readonly reloadEveryMs?: number;
  readonly timeoutMs?: number;
  /** Also saves a PNG of the page here (once `until` holds). */
  readonly screenshotFile?: string;
}

/** A page that has rendered nothing for this long is reloaded (a load that stalled). */
const PAGE_STUCK_MS = 30_000;

/**
 * A page rendered in a real headless Chromium, driven over the DevTools protocol on a pipe (no
 * WebSocket client needed): its visible text and HTML once `until` holds, or at the timeout.
 */
export async function renderPage(url: string, o: PageOptions = {}): Promise<{ text: string; html: string }> {
  const userDir = fs.mkdtempSync('/tmp/kft-chromium-');
 const child = spawn(findChromium(), [...FLAGS, `--user-data-dir=${userDir}`, '--remote-debugging-pipe', 'about:blank'], {
    stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'],
  });
  const cdp = new PipeDevTools(child.stdio[3] as Writable, child.stdio[4] as Readable);
  try {
    const { targetId } = (await cdp.send('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
    const { sessionId } = (await cdp.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
    const page = (method: string, params: Record<string, unknown> = {}) => cdp.send(method, params, sessionId);
    await page('Page.enable');
    if (o.localStorage) {
      const sets = Object.entries(o.localStorage).map(([k, v]) => `localStorage.setItem(${JSON.stringify(k)}, ${JSON.stringify(v)});`);
      await page('Page.addScriptToEvaluateOnNewDocument', { source: sets.join('\n') });
    }
    await page('Page.navigate', { url });
    const deadline = Date.now() + (o.timeoutMs ?? 30_000);
    // A reload can commit while an evaluation runs ("Inspected target navigated or closed", or its
    // context gone): read again in the new document.
    const read = async (expression: string): Promise<string> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return ((await page('Runtime.evaluate', { expression, returnByValue: true })) as { result: { value?: string } }).result.value ?? '';
        } catch (err) {
          if (attempt >= 20 || !/navigated or closed|context/i.test(String(err))) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    };
    let reloadEveryMs = o.reloadEveryMs ?? 5_000;
    let loadedAt = Date.now();
    let text = '';
    for (;;) {
      const now = await read(PAGE_TEXT);
      const rendered = now.trim() !== '';
      // An empty read is a document still loading: the text shown before it stands.
      if (rendered || text === '') text = now;
      if (!o.until || o.until(text) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
      // Reloaded for fresh data only once the page has rendered, each time after twice as long (up
      // to PAGE_STUCK_MS): on a busy machine the UI's app, its API calls and its details frame can
      // take longer than reloadEveryMs, and a reload then starts them over every time (an empty or
      // half-drawn page to the end). One that renders nothing for PAGE_STUCK_MS is reloaded anyway.
      const since = Date.now() - loadedAt;
      if (since >= (rendered ? reloadEveryMs : PAGE_STUCK_MS)) {
        await page('Page.reload');
        loadedAt = Date.now();
        reloadEveryMs = Math.min(reloadEveryMs * 2, PAGE_STUCK_MS);
      }
    }
    if (o.screenshotFile) {
      const { data } = (await page('Page.captureScreenshot', { format: 'png' })) as { data: string };
      fs.writeFileSync(o.screenshotFile, Buffer.from(data, 'base64'));
    }
    return { text, html: await read('document.documentElement.outerHTML') };
  } finally {
    // Closed through the protocol, so its helper processes are gone before its profile is removed.
    const exited = new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)));
    const within = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());
    await Promise.race([cdp.send('Browser.close', {}).catch(() => undefined), within(5_000)]);
    if ((await Promise.race([exited.then(() => true), within(5_000).then(() => false)])) === false) child.kill('SIGKILL');
    await exited;
    fs.rmSync(userDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  }
}

/**
 * The page's visible text, and that of its same-origin frames after it: the UI renders Markdown
 * (a workflow's current details) in an iframe of its own origin (`/render?content=…`).
 */
const PAGE_TEXT = `(() => {
  const parts = [document.body ? document.body.innerText : ''];
  for (const frame of document.querySelectorAll('iframe')) {
    try { parts.push(frame.contentDocument && frame.contentDocument.body ? frame.contentDocument.body.innerText : ''); } catch (e) {}
  }
  return parts.join('\\n');
})()`;

/** Chromium's DevTools protocol over --remote-debugging-pipe: JSON messages separated by NUL bytes. */
class PipeDevTools {
  private next = 1;
  private buffered = '';
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  constructor(
    private readonly out: Writable,
    input: Readable,
  ) {
    input.on('data', (chunk: Buffer) => {
      this.buffered += chunk.toString('utf8');
      for (let end = this.buffered.indexOf('\0'); end >= 0; end = this.buffered.indexOf('\0')) {
        const message = JSON.parse(this.buffered.slice(0, end)) as { id?: number; result?: unknown; error?: { message: string } };
        this.buffered = this.buffered.slice(end + 1);
        const w = message.id === undefined ? undefined : this.waiting.get(message.id);
        if (!w) continue;
        this.waiting.delete(message.id!);
        if (message.error) w.reject(new Error(`DevTools: ${message.error.message}`));
        else w.resolve(message.result);
      }
    });
    const gone = () => {
      for (const w of this.waiting.values()) w.reject(new Error('Chromium exited'));
      this.waiting.clear();
    };
    input.on('close', gone);
    out.on('error', gone);
  }

  send(method: string, params: Record<string, unknown>, sessionId?: string): Promise<unknown> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.out.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });
  }
}
