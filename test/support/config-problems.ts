// The problems a ConfigError lists for an environment that loadConfig must refuse.
import { ConfigError } from '../../src/config/config-error';
import { loadConfig } from '../../src/config/load-config';

export function problemsOf(env: NodeJS.ProcessEnv): { variable: string; message: string }[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  throw new Error('expected a ConfigError');
}
