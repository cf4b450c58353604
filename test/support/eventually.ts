/**
 * Polls `fn` until it returns a value (not undefined/false), or fails naming what it waited for.
 * `detail`, when given, is asked once on timeout for what the failure message should add (e.g.
 * which partitions were not running, and in which phase); it must not throw (a throw is reported
 * in its place).
 */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
  detail?: () => Promise<string | undefined> | string | undefined,
): Promise<T> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) {
        if (process.env.KFT_TEST_TRACE === '1') process.stderr.write(`[wait] ${what}: ${Date.now() - started} ms\n`);
        return v as T;
      }
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  let more = '';
  if (detail) {
    try {
      const d = await detail();
      if (d) more = `: ${d}`;
    } catch (err) {
      more = ` (describing the failure failed: ${String(err)})`;
    }
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}${more}`);
}
