// The process entry point: signal handlers first, then read the config once, start the gateway, report where it listens.
import { DEVELOPMENT_API_KEY } from './callers/development-key';
import { ConfigError } from './config/config-error';
import { loadConfig } from './config/load-config';
import { type RunningGateway, startGateway } from './gateway';

async function main(): Promise<void> {
  let gateway: RunningGateway | undefined;

  // Registered before anything slow: Node as PID 1 (a container) ignores a signal it has no handler for, so a
  // SIGTERM during start-up (Redis unreachable, a slow upstream) would otherwise wait out the whole start-up.
  const stop = (signal: NodeJS.Signals) => {
    if (!gateway) {
      // Nothing is served yet: nothing to drain.
      process.stderr.write(`${signal} during start-up: stopping at once\n`);
      process.exit(0);
    }
    gateway.logger.info({ signal }, 'stopping');
    gateway.shutdown().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.on('SIGHUP', () => {
    if (!gateway) return;
    gateway.logger.info(
      'SIGHUP: re-reading the accounts, their credentials, the client registry and the operations catalogue',
    );
    void gateway.reload();
  });
  process.on('unhandledRejection', (reason) => {
    if (gateway) gateway.logger.error({ err: reason }, 'unhandled rejection');
    else
      process.stderr.write(`unhandled rejection during start-up (${(reason as Error)?.name ?? 'error'})\n`);
  });

  try {
    const config = loadConfig(process.env);
    // Loaded only in local mode: production start-up never loads the simulator.
    const local = config.mode === 'local' ? await import('./local-mode.js') : undefined;
    gateway = await startGateway(config, {
      localUpstream: await local?.startLocalUpstream(),
      localSessions: local?.localSessions(),
    });
    const exposed = !isLoopback(gateway.listenAddress);
    if (config.mode === 'local') printLocalModeHelp(gateway, exposed);
    gateway.logger.info(
      { listen: gateway.listenAddress, url: gateway.url, mode: config.mode, metrics: gateway.metricsUrl },
      'gateway listening',
    );
    if (config.mode === 'local' && exposed)
      gateway.logger.warn(
        { listen: gateway.listenAddress },
        'local mode listens beyond loopback: the development key is reachable from the network (unset HOST)',
      );
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
    } else {
      process.stderr.write(`The gateway could not start: ${(error as Error).message}\n`);
    }
    process.exit(1);
  }
}

/** `127.0.0.1:8080`, `[::1]:8080`: only this machine can connect. */
function isLoopback(listenAddress: string): boolean {
  const host = listenAddress.slice(0, listenAddress.lastIndexOf(':')).replace(/^\[|\]$/g, '');
  return host.startsWith('127.') || host === '::1' || host.startsWith('::ffff:127.');
}

function printLocalModeHelp(gateway: RunningGateway, exposed: boolean): void {
  const port = new URL(gateway.url).port;
  const ids = gateway.accounts.all().map((account) => account.id);
  process.stdout.write(
    [
      '',
      `Payments BFF gateway in LOCAL MODE, listening on ${gateway.listenAddress} (upstream: the bundled simulator; answers carry X-Upstream: simulator)`,
      ...(exposed
        ? [
            `WARNING: ${gateway.listenAddress} is reachable from the network, and so is the development key local-dev-key.`,
            'Unset HOST (local mode then listens on 127.0.0.1 only).',
          ]
        : []),
      `Try it (provider accounts: ${ids.join(', ')}; X-Upstream-Account picks one, the answer names it):`,
      ...ids.map(
        (id) =>
          `  curl -i -H 'X-API-Key: ${DEVELOPMENT_API_KEY}' -H 'X-Upstream-Account: ${id}' localhost:${port}/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992`,
      ),
      `  curl -H 'X-API-Key: ${DEVELOPMENT_API_KEY}' -H 'Content-Type: application/json' \\`,
      `       -d '{"country":"ARG","document":{"id":"20-17254359-7","type":"CUIT"}}' localhost:${port}/api/validation/document`,
      ...(gateway.identityProvider
        ? [
            '',
            `Browser sessions: open ${gateway.url}/ and log in at the development identity provider (${gateway.identityProvider.issuer})`,
            `  as ${gateway.identityProvider.username} / ${gateway.identityProvider.password}   (a new password at every start)`,
          ]
        : []),
      '',
      '',
    ].join('\n'),
  );
}

void main();
