// `warmstart serve -m $WS_MODEL --port 0 ARGS...` for the end-to-end tests: resolves with
// the URL the server prints once it listens, and the child process to stop afterwards.
import { spawn } from 'node:child_process';

export function startServer(args) {
  const { WS_BINARY, WS_MODEL } = process.env;
  if (!WS_BINARY || !WS_MODEL) throw new Error('set WS_BINARY and WS_MODEL (or WS_SERVER_URL)');
  const server = spawn(WS_BINARY, ['serve', '-m', WS_MODEL, '--port', '0', ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  const url = new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log)), 60_000);
    server.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    server.on('exit', (code) => reject(new Error(`server exited (${code}):\n${log}`)));
  });
  return { server, url };
}
