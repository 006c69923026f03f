// Starts `mcullm serve -m MODEL --port 0 EXTRA...` for a browser test; resolves the port it bound
// (read from its start-up line on stderr). The child is pushed onto `children` so the test can kill it.
import { spawn } from 'node:child_process';

export function startServer(bin, model, extraArgs, children) {
  const child = spawn(bin, ['serve', '-m', model, '--port', '0', ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (b) => {
      err += b;
      const m = err.match(/http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error('mcullm serve exited with ' + code + ': ' + err)));
  });
}
