// `node --import ./test/support/count-modules.mjs …`: appends every module the process loads to the
// file named by $POLAR_MODULE_LOG, one path or URL a line. ES modules are seen by a resolve hook (it
// runs on the loader's thread, so it writes the file itself, synchronously); CommonJS modules that
// other CommonJS modules require never reach that hook, so the require cache is added at exit.
import fs from 'node:fs';
import { createRequire, register } from 'node:module';

const log = process.env.POLAR_MODULE_LOG;
if (log) {
  register('./count-modules-hooks.mjs', import.meta.url, { data: { log } });
  const require = createRequire(import.meta.url);
  process.on('exit', () => {
    const paths = Object.keys(require.cache);
    if (paths.length > 0) fs.appendFileSync(log, `${paths.join('\n')}\n`);
  });
}
