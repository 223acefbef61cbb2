// What start-up made, and how to close it: closed in the reverse order it was made, so nothing outlives its users.

export type Closer = () => Promise<void> | void;

/** What a builder made, and how to close it (in the order the closers are listed). */
export interface Built<T> {
  readonly made: T;
  readonly closers: readonly Closer[];
}

/** A builder that fails half-way closes what it made so far (in reverse) before the error goes on. */
export async function building<T>(make: (closers: Closer[]) => Promise<T> | T): Promise<Built<T>> {
  const closers: Closer[] = [];
  try {
    return { made: await make(closers), closers };
  } catch (error) {
    await closeInReverse(closers);
    throw error;
  }
}

export interface Lifecycle {
  /** Takes what a builder made and remembers how to close it. */
  use<T>(building: Built<T> | Promise<Built<T>>): Promise<T>;
  /** Closes everything in reverse order; one failing closer does not stop the others. */
  closeAll(): Promise<void>;
}

export function createLifecycle(): Lifecycle {
  const closers: Closer[] = [];
  return {
    async use(building) {
      const { made, closers: own } = await building;
      closers.push(...own);
      return made;
    },
    closeAll: () => closeInReverse(closers.splice(0)),
  };
}

async function closeInReverse(closers: readonly Closer[]): Promise<void> {
  for (const close of [...closers].reverse()) {
    try {
      await close();
    } catch {
      // One closer failing (synchronously or not) never keeps the others from running.
    }
  }
}
