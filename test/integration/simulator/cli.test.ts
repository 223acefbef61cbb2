import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:https';
import { resolve } from 'node:path';
import { freePort, waitFor } from '../../support/ports';
import { createTestPki } from '../../support/test-certificates';

const ROOT = resolve(__dirname, '../../..');

function runCli(env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/simulator/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += String(chunk);
  });
  child.stderr?.on('data', (chunk) => {
    output += String(chunk);
  });
  return { child, output: () => output };
}

describe('npm run simulator (src/simulator/main.ts)', () => {
  it('serves on SIMULATOR_PORT, logs its URL and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const { child, output } = runCli({ SIMULATOR_PORT: String(port) });
    const exited = once(child, 'exit');
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/__simulator/stats`)).ok, {
        timeoutMs: 20_000,
        what: 'the simulator CLI',
      });
      const login = await fetch(`http://127.0.0.1:${port}/api/token/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'sandbox-merchant', password: 'sandbox-password' }),
      });
      expect(login.status).toBe(200);
      expect(output()).toContain(`http://127.0.0.1:${port}`);
      expect(output()).not.toContain('sandbox-password');
    } finally {
      child.kill('SIGTERM');
    }
    const [code, signal] = await exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
  });

  it('serves HTTPS with SIMULATOR_TLS_CERT_FILE and SIMULATOR_TLS_KEY_FILE', async () => {
    const pki = await createTestPki();
    const { certFile, keyFile } = pki.files(pki.good);
    const port = await freePort();
    const { child, output } = runCli({
      SIMULATOR_PORT: String(port),
      SIMULATOR_TLS_CERT_FILE: certFile,
      SIMULATOR_TLS_KEY_FILE: keyFile,
    });
    const exited = once(child, 'exit');
    const status = () =>
      new Promise<number | string>((done) => {
        const req = request(`https://127.0.0.1:${port}/__simulator/stats`, { ca: pki.caPem }, (res) => {
          res.resume();
          done(res.statusCode ?? 0);
        });
        req.on('error', (error: NodeJS.ErrnoException) => done(error.code ?? 'error'));
        req.end();
      });
    try {
      await waitFor(async () => (await status()) === 200, { timeoutMs: 20_000, what: 'the HTTPS simulator' });
      expect(output()).toContain(`https://127.0.0.1:${port}`);
    } finally {
      child.kill('SIGTERM');
    }
    await exited;
  });

  it('exits 1 when only one of the TLS files is given', async () => {
    const { child, output } = runCli({
      SIMULATOR_PORT: '0',
      SIMULATOR_TLS_CERT_FILE: '/nonexistent/cert.pem',
    });
    const [code] = await once(child, 'exit');
    expect(code).toBe(1);
    expect(output()).toContain('SIMULATOR_TLS_KEY_FILE');
  });

  it('exits 1 naming a bad variable, never printing the password', async () => {
    const { child, output } = runCli({ SIMULATOR_PORT: 'eighty', SIMULATOR_PASSWORD: 'do-not-print-me' });
    const [code] = await once(child, 'exit');
    expect(code).toBe(1);
    expect(output()).toContain('SIMULATOR_PORT');
    expect(output()).not.toContain('do-not-print-me');
  });
});
