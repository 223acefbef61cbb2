// `npm run simulator`: the Payment API simulator as its own process, configured by SIMULATOR_* variables.
import { pino } from 'pino';
import { startSimulator } from './simulator';
import { loadSimulatorConfig } from './simulator-config';

const logger = pino({ name: 'payment-simulator' });

async function main(): Promise<void> {
  let options: ReturnType<typeof loadSimulatorConfig>;
  try {
    options = loadSimulatorConfig(process.env);
  } catch (err) {
    logger.fatal((err as Error).message);
    process.exitCode = 1;
    return;
  }
  const simulator = await startSimulator(options);
  logger.info(
    {
      url: simulator.url,
      username: options.username,
      extraUsernames: options.extraAccounts?.map((account) => account.username) ?? [],
      accessTtlSeconds: options.accessTtlSeconds,
      refreshTtlSeconds: options.refreshTtlSeconds,
      allowedIps: options.allowedIps,
      rotateRefresh: options.rotateRefresh,
      tls: options.tls !== undefined,
    },
    `Payment API simulator listening on ${simulator.url} (controls under ${simulator.url}/__simulator/)`,
  );

  const stop = (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'stopping');
    simulator.close().then(
      () => {
        process.exitCode = 0;
      },
      (err: unknown) => {
        logger.error({ err }, 'close failed');
        process.exitCode = 1;
      },
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  logger.fatal({ err }, 'simulator failed to start');
  process.exitCode = 1;
});
