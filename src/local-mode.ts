// Local mode: the bundled simulator stands in for the provider. The only module of src/ that loads src/simulator/.
import type { LocalUpstream } from './gateway';
import { startSimulator } from './simulator/simulator';
import { SIMULATOR_DEFAULT_PASSWORD, SIMULATOR_DEFAULT_USERNAME } from './simulator/simulator-config';
import { staticCredentialSource } from './tokens';

/** Starts the simulator on loopback, with the development credentials it accepts. */
export async function startLocalUpstream(): Promise<LocalUpstream> {
  const simulator = await startSimulator({ host: '127.0.0.1', port: 0 });
  return {
    baseUrl: simulator.url,
    credentials: staticCredentialSource(SIMULATOR_DEFAULT_USERNAME, SIMULATOR_DEFAULT_PASSWORD),
    close: () => simulator.close(),
  };
}
