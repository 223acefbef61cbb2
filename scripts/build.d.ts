// Types of scripts/build.js for the tests that import it (test/unit/build/build-if-stale.test.ts).

export interface BuildOptions {
  /** Files (the lockfiles) whose change since the last build forces a full build. */
  readonly dependencyFiles?: readonly string[];
  /** Compile everything, stale or not. */
  readonly force?: boolean;
}

export interface BuildResult {
  /** The compiler ran: a source, a config, an output or a dependency had changed. */
  readonly built: boolean;
  /** Outputs whose source is gone, deleted. */
  readonly removed: readonly string[];
  /** The compiler's exit status: 0 when it succeeded or had nothing to do. */
  readonly status: number;
}

/** Brings the output of an incremental tsconfig (outDir, tsBuildInfoFile) up to date; see scripts/build.js. */
export function buildIfStale(configFile: string, options?: BuildOptions): BuildResult;
