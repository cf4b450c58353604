/**
 * Takes the README's screenshot of a flow in the Temporal UI and checks, in the rendered page,
 * that every running partition workflow of the flow is listed:
 *   node bin/run-ts.js scripts/ui-screenshot.ts examples/sales/flow.ts [docs/temporal-ui.png]
 */
import path from 'node:path';
import { readInfraSettings } from '../infra/settings';
import { loadFlowModule } from '../workers/cli/flow-module';
import { flowStatus } from '../workers/cli/flow-status';
import { flowColumnsStorage, flowUiUrl, renderPage } from './temporal-ui';

async function main(): Promise<void> {
  const [modulePath, out = 'docs/temporal-ui.png'] = process.argv.slice(2);
  if (!modulePath) throw new Error('usage: scripts/ui-screenshot.ts <flow-module> [out.png]');
  const flow = loadFlowModule(modulePath);
  const s = readInfraSettings();
  const url = flowUiUrl(`http://${s.temporal.host}:${s.temporal.uiPort}`, s.temporal.namespace, flow.name);
  const expected = (await flowStatus(flow.name)).map((p) => `kafka-flow/${flow.name}/${p.topic}/${p.partition}`);
  if (expected.length === 0) throw new Error(`no running partition workflows of "${flow.name}": start the example first (npm start)`);
  // With the columns the README's Operations section sets up: each row shows phase, owner, generation, lag and keys.
  const listed = (text: string) => expected.every((id) => new RegExp(`${id}\\s+running`).test(text));
  const { text } = await renderPage(url, { localStorage: flowColumnsStorage(s.temporal.namespace), until: listed, screenshotFile: path.resolve(out) });
  const missing = expected.filter((id) => !new RegExp(`${id}\\s+running`).test(text));
  if (missing.length > 0) throw new Error(`the Temporal UI does not list ${missing.join(', ')} as running at ${url}`);
  console.log(`the UI lists all ${expected.length} partitions of "${flow.name}"; screenshot: ${out}\n${url}`);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
