// `npm run doctor`: prints each check with ✓/!/✗ and its fix; exits 0 only when no check fails (warnings pass).
import { pino } from 'pino';
import { loadConfig } from '../config/load-config';
import { createCredentialSource } from '../tokens';
import { formatReport, runDoctor } from './doctor';
import {
  checkClientRegistry,
  checkRedisStore,
  localSimulatorTarget,
  requestUpstreamToken,
} from './doctor-checks';
import { sessionProviderStep } from './doctor-session-provider';

async function main(): Promise<number> {
  const report = await runDoctor({
    loadConfig: () => loadConfig(process.env),
    checkClients: checkClientRegistry,
    checkStore: checkRedisStore,
    checkSessionProvider: sessionProviderStep,
    async requestToken(config) {
      const options = {
        timeoutMs: config.upstream.timeoutMs,
        headers: config.upstream.staticHeaders,
        extraCa: config.upstream.extraCa,
      };
      if (config.mode === 'local' || !config.upstream.baseUrl) {
        // Local mode talks to the bundled simulator: start it here, as the gateway would (loaded only then).
        const simulator = await (await import('../local-mode.js')).startLocalUpstream();
        try {
          return await requestUpstreamToken(
            localSimulatorTarget(simulator.baseUrl, simulator.credentials.current()),
            options,
          );
        } finally {
          await simulator.close();
        }
      }
      // The same source the gateway uses (inline values or *_FILE), read once and not watched.
      const source = await createCredentialSource(config.credentials, {
        logger: pino({ enabled: false }),
        pollIntervalMs: 0,
      });
      try {
        const { username, password } = source.current();
        return await requestUpstreamToken({ baseUrl: config.upstream.baseUrl, username, password }, options);
      } finally {
        source.close();
      }
    },
  });
  process.stdout.write(formatReport(report));
  return report.ok ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`doctor failed unexpectedly (${(error as Error)?.name ?? 'error'})\n`);
    process.exitCode = 2;
  },
);
