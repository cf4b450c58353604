// npm's install-script policy (package.json "allowScripts", npm >= 11): every dependency in the
// lockfile that has an install script is either allowed or denied, and nothing else is listed, so
// `npm ci` prints no "install scripts not yet covered by allowScripts" warning and a new
// dependency with an install script fails here until someone decides about it
// (`npm install-scripts approve|deny <pkg>`). Name-only entries: the lockfile has no "resolved"
// URLs (omit-lockfile-registry-resolved), and npm cannot match a pinned `pkg@1.2.3` without them.
import fs from 'node:fs';
import path from 'node:path';

const packageRoot = path.join(__dirname, '../..');
const read = (file: string) => JSON.parse(fs.readFileSync(path.join(packageRoot, file), 'utf8'));
const pkg = read('package.json') as { allowScripts?: Record<string, boolean> };
const lock = read('package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> };

/** The dependencies whose install scripts run: each one's native binary, checked and built or fetched where no prebuilt fits. */
const ALLOWED = ['@swc/core', 'esbuild', 'lmdb'];
/**
 * Not needed: protobufjs@7 (under @grpc/proto-loader) only prints a version-scheme hint;
 * @parcel/watcher builds from source only when npm_config_build_from_source=true (and jest uses it
 * only in watch mode); msgpackr-extract is msgpackr's optional accelerator, whose prebuilt binary
 * loads without the script.
 */
const DENIED = ['@parcel/watcher', 'msgpackr-extract', 'protobufjs'];

test('allowScripts allows and denies exactly the dependencies with install scripts', () => {
  const withScripts = Object.entries(lock.packages)
    .filter(([location, entry]) => location !== '' && entry.hasInstallScript)
    .map(([location]) => location.slice(location.lastIndexOf('node_modules/') + 'node_modules/'.length));
  const policy = pkg.allowScripts ?? {};
  expect([...new Set(withScripts)].sort()).toEqual(Object.keys(policy).sort());
  expect(Object.keys(policy).filter((name) => policy[name] === true).sort()).toEqual(ALLOWED);
  expect(Object.keys(policy).filter((name) => policy[name] === false).sort()).toEqual(DENIED);
});
