// startGateway's lifecycle: what the builders made is closed in reverse, also when a builder fails half-way.
import { building, createLifecycle } from '../../../src/assembly/lifecycle';

describe('lifecycle', () => {
  test('closes in the reverse order things were made, each builder in the reverse order of its closers', async () => {
    const closed: string[] = [];
    const life = createLifecycle();
    const redis = await life.use(
      building((closers) => {
        closers.push(() => void closed.push('redis'));
        return 'client';
      }),
    );
    await life.use(
      building(async (closers) => {
        closers.push(() => void closed.push('credentials'));
        closers.push(async () => void closed.push('token manager'));
        return redis;
      }),
    );
    expect(closed).toEqual([]);
    await life.closeAll();
    expect(closed).toEqual(['token manager', 'credentials', 'redis']);
    await life.closeAll();
    expect(closed).toHaveLength(3);
  });

  test('a closer that throws or rejects does not stop the others', async () => {
    const closed: string[] = [];
    const life = createLifecycle();
    await life.use(
      building((closers) => {
        closers.push(() => void closed.push('first'));
        closers.push(() => {
          throw new Error('boom');
        });
        closers.push(() => Promise.reject(new Error('late boom')));
      }),
    );
    await expect(life.closeAll()).resolves.toBeUndefined();
    expect(closed).toEqual(['first']);
  });

  test('a builder failing half-way closes what it made, and the error goes on', async () => {
    const closed: string[] = [];
    const life = createLifecycle();
    const failing = building(async (closers) => {
      closers.push(() => void closed.push('agent'));
      closers.push(() => void closed.push('client'));
      throw new Error('upstream unreachable');
    });
    await expect(life.use(failing)).rejects.toThrow('upstream unreachable');
    expect(closed).toEqual(['client', 'agent']);
    await life.closeAll();
    expect(closed).toEqual(['client', 'agent']);
  });
});
