// The process entry point: read the config once, start the gateway, handle signals.
import { DEVELOPMENT_API_KEY } from './callers/development-key';
import { ConfigError } from './config/config-error';
import { loadConfig } from './config/load-config';
import { type RunningGateway, startGateway } from './gateway';

async function main(): Promise<void> {
  let gateway: RunningGateway;
  try {
    const config = loadConfig(process.env);
    gateway = await startGateway(config);
    if (config.mode === 'local') printLocalModeHelp(gateway.url);
    gateway.logger.info(
      { url: gateway.url, mode: config.mode, metrics: gateway.metricsUrl },
      'gateway listening',
    );
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
    } else {
      process.stderr.write(`The gateway could not start: ${(error as Error).message}\n`);
    }
    process.exit(1);
  }

  const stop = (signal: NodeJS.Signals) => {
    gateway.logger.info({ signal }, 'stopping');
    gateway.shutdown().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.on('SIGHUP', () => {
    gateway.logger.info('SIGHUP: re-reading credentials and the client registry');
    void gateway.reload();
  });
  process.on('unhandledRejection', (reason) => {
    gateway.logger.error({ err: reason }, 'unhandled rejection');
  });
}

function printLocalModeHelp(url: string): void {
  const port = new URL(url).port;
  process.stdout.write(
    [
      '',
      `Payments BFF gateway in LOCAL MODE on ${url} (upstream: the bundled simulator; answers carry X-Upstream: simulator)`,
      'Try it:',
      `  curl -H 'X-API-Key: ${DEVELOPMENT_API_KEY}' localhost:${port}/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992`,
      `  curl -H 'X-API-Key: ${DEVELOPMENT_API_KEY}' -H 'Content-Type: application/json' \\`,
      `       -d '{"country":"ARG","document":{"id":"20-17254359-7","type":"CUIT"}}' localhost:${port}/api/validation/document`,
      '',
      '',
    ].join('\n'),
  );
}

void main();
