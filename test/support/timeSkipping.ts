import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { formatFatal } from '../../config/errors';
import { tailLog } from '../../infra/processes';
import { readInfraSettings, VERSIONS } from '../../infra/settings';
import { prepareTimeSkippingServer, type TimeSkippingServer } from '../../infra/timeSkippingServer';
import { searchAttributes } from '../../workflows/searchAttributes';
import { eventually } from './eventually';

const HOW_TO_GET_IT =
  `The time-skipping workflow tests need Temporal's test server (io.temporal:temporal-test-server ${VERSIONS.temporalTestServer} ` +
  'from Maven Central, run on Java 17). The tests fetch it with `mvn` into the cache folder (.cache/ or KFT_CACHE_DIR) on first use ' +
  'and start it themselves: install Maven and Java 17 (apt-get install -y maven openjdk-17-jre-headless, or set KFT_JAVA17 to a ' +
  'Java 17 binary) and let Maven reach Maven Central (or its mirror in ~/.m2/settings.xml).';

/**
 * A TestWorkflowEnvironment on Temporal's time-skipping test server, with the partition workflows'
 * search attributes registered. Time is locked (runs at wall-clock speed) except while the test
 * waits through `env.sleep()` — see `eventuallySkipping`. Never skips: a server that cannot be
 * fetched or started fails the tests with how to get it.
 */
export async function timeSkippingEnvironment(): Promise<TestWorkflowEnvironment> {
  let server: TimeSkippingServer;
  try {
    server = await prepareTimeSkippingServer(readInfraSettings(), (line) => process.stderr.write(`[time-skipping server] ${line}\n`));
  } catch (err) {
    throw new Error(`${HOW_TO_GET_IT}\nIt could not be fetched or set up: ${formatFatal(err)}`);
  }
  // createTimeSkipping() gives the server 5 s to answer; on a machine busy with other tests a JVM
  // can take longer now and then, so a start that timed out is tried again (a warm cache helps).
  const failures: string[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    let env: TestWorkflowEnvironment | undefined;
    try {
      env = await TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path: server.launcher } },
      });
      await env.connection.operatorService.addSearchAttributes({
        namespace: env.namespace ?? 'default',
        searchAttributes: Object.fromEntries(Object.values(searchAttributes).map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)!])),
      });
      return env;
    } catch (err) {
      await env?.teardown();
      failures.push(`attempt ${attempt}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  throw new Error(
    `${HOW_TO_GET_IT}\nIt was fetched (${server.launcher}) but did not start:\n${failures.join('\n')}\n` +
      `Its log (${server.logFile}):\n${tailLog(server.logFile)}`,
  );
}

/**
 * `eventually`, polling every 250 ms of the test server's time instead of the wall clock's: between
 * two polls the server skips ahead whenever nothing is in flight (no activity scheduled or running,
 * no workflow task) — a backoff or an owner retry that only waits on a workflow timer takes no
 * real time. While an activity is pending the server's clock is locked to the wall clock, so
 * heartbeat and schedule-to-start timeouts still take their real time.
 */
export function eventuallySkipping(env: TestWorkflowEnvironment) {
  return <T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 60_000): Promise<T> =>
    eventually(what, fn, timeoutMs, undefined, () => env.sleep(250));
}
