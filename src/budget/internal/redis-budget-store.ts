// The budget store shared by the fleet: the state of fleet-state.ts in one Redis hash per account, changed by one
// Lua script per exchange (TIME, HGETALL, HSET, PEXPIRE: five commands with the EVAL), and signals on a channel.

import type { RedisClient } from '../../store/redis-connection';
import type { ChannelListener } from '../../tokens';
import { BudgetRecordError, type BudgetStore, decodeSignal, encodeSignal } from './budget-store';
import {
  CEILING_MARGIN,
  CEILING_MEMORY_MS,
  CEILING_SETTLE_MS,
  DECREASE_COOLDOWN_MS,
  DECREASE_FACTOR,
  type ExchangeReply,
  FAR_INTERVAL_MS,
  INCREASE_PER_SECOND,
  MIN_LEARNED_RATE,
  MIN_STEP,
  NEAR_INTERVAL_MS,
  NEAR_SHARE,
  QUICK_INTERVAL_MS,
  READING_FLOOR,
  RECORD_TTL_MS,
  RELEASE_INTERVAL_MS,
} from './fleet-state';

/**
 * exchangeWithFleet (fleet-state.ts), step for step. Fields: `r:<replica>` = "expiresAt dc ds dh ac as ah accepted
 * hc hs hh" (demand, allocation and hold by priority: critical, standard, sheddable; a record of 8 fields, written
 * before holds existed, holds its allocation); `@…` the shared state. Whatever else a field holds (written by hand,
 * NaN, Infinity) reads as absent and is counted in the reply: an unreadable replica is dropped, an unreadable
 * number is unset. A pause read from the record never lasts longer from now than the cap (ARGV[16]).
 * Times: with ARGV[17] = 'redis' (the default) the record keeps Redis's clock (TIME), one clock for the fleet: the
 * caller's times (its now, a pause's end) are moved onto it by the difference of the two clocks, and the times
 * answered (the pause's end, the lease) moved back, so a replica whose host clock is off neither expires the others'
 * leases early (they would be dropped and their part granted twice) nor ends a pause early.
 */
const EXCHANGE_SCRIPT = `
local function num(v)
  local n = tonumber(v)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end
local callerNow = tonumber(ARGV[1])
local now = callerNow
if ARGV[17] == 'redis' then
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local shift = now - callerNow
local me = 'r:' .. ARGV[2]
local configured = tonumber(ARGV[3])
if configured ~= nil and configured <= 0 then configured = nil end
local shS, shT, shC = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local dC, dT, dS = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local accepted = tonumber(ARGV[10])
local event, eventArg = ARGV[11], tonumber(ARGV[12])
if event == 'pause' then eventArg = eventArg + shift end
local uC, uT, uS = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local maxPause = tonumber(ARGV[16])
local flat = redis.call('HGETALL', KEYS[1])
local st = {}
local repaired = 0
local oN, oDC, oDT, oDS, oAC, oAT, oAS, oG = 0, 0, 0, 0, 0, 0, 0, 0
local gone = {}
local pat = '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)(.*)$'
local holds = '^ (%S+) (%S+) (%S+)$'
for i = 1, #flat, 2 do
  local f, v = flat[i], flat[i + 1]
  if string.sub(f, 1, 1) == '@' then
    st[f] = num(v)
    if st[f] == nil and v ~= '' then repaired = repaired + 1 end
  elseif f ~= me then
    local e, a, b, c, d, x, y, g, rest = string.match(v, pat)
    local n = {num(e) or -1, num(a) or -1, num(b) or -1, num(c) or -1, num(d) or -1, num(x) or -1, num(y) or -1,
      num(g) or -1}
    if rest == '' then
      n[9], n[10], n[11] = n[5], n[6], n[7]
    elseif rest ~= nil then
      local hc, hs, hh = string.match(rest, holds)
      n[9], n[10], n[11] = num(hc) or -1, num(hs) or -1, num(hh) or -1
    end
    local ok = rest ~= nil and n[1] > now and n[1] <= now + ${RECORD_TTL_MS}
    for j = 2, 11 do ok = ok and n[j] >= 0 end
    if ok then
      oN = oN + 1; oDC = oDC + n[2]; oDT = oDT + n[3]; oDS = oDS + n[4]
      oAC = oAC + n[9]; oAT = oAT + n[10]; oAS = oAS + n[11]; oG = oG + n[8]
    else
      gone[#gone + 1] = f
    end
  end
end
if #gone > 0 then redis.call('HDEL', KEYS[1], unpack(gone)) end
local learned = st['@learned']
if learned ~= nil and learned <= 0 then learned = nil end
local ceiling = st['@ceiling']
if ceiling ~= nil and ceiling <= 0 then ceiling = nil end
local ceilingAt = st['@ceilingAt'] or 0
local lastDecrease = st['@lastDecrease'] or 0
local raisedAt = st['@raisedAt'] or 0
local pause = math.min(st['@pause'] or 0, now + maxPause)
local probeUntil = st['@probeUntil'] or 0
local function effective()
  if learned == nil then return configured end
  if configured == nil then return learned end
  return math.min(configured, learned)
end
local won = 0
if event == 'decrease' and now - lastDecrease >= ${DECREASE_COOLDOWN_MS} then
  local current = effective()
  local reported = oG + accepted
  local drew
  if current == nil then drew = math.max(reported, accepted * (oN + 1))
  else drew = math.min(current, math.max(reported, ${READING_FLOOR} * current)) end
  if drew > 0 then
    learned = math.max(${MIN_LEARNED_RATE}, drew * ${DECREASE_FACTOR})
    if current ~= nil and now - lastDecrease >= ${CEILING_SETTLE_MS} then
      if reported <= 0 then ceiling = current
      elseif reported < ${READING_FLOOR} * current then ceiling = nil
      else ceiling = math.min(current, reported) end
    else ceiling = nil end
    ceilingAt = now; lastDecrease = now; raisedAt = now
  end
elseif event == 'pause' then
  pause = math.max(pause, math.min(eventArg, now + maxPause)); probeUntil = 0
elseif event == 'resume' then
  if pause <= now then pause = 0 end
  probeUntil = 0
elseif event == 'probe' then
  if pause > 0 and now >= pause and probeUntil <= now then probeUntil = now + eventArg; won = 1 end
end
if learned ~= nil and now - lastDecrease >= ${DECREASE_COOLDOWN_MS} and now > raisedAt then
  local cap = configured or math.huge
  local known = ceiling ~= nil and now - ceilingAt < ${CEILING_MEMORY_MS}
  if known then cap = math.min(cap, ceiling * ${CEILING_MARGIN}) end
  local step = math.max(${MIN_STEP}, ${INCREASE_PER_SECOND} * (known and ceiling or learned))
  if learned < cap then learned = math.min(cap, learned + step * (now - raisedAt) / 1000) end
  raisedAt = now
  if configured ~= nil and learned >= configured then learned = nil; ceiling = nil end
end
local rate = effective()
local replicas = oN + 1
local near = rate ~= nil and (oDC + oDT + oDS + dC + dT + dS >= ${NEAR_SHARE} * rate or learned ~= nil or pause > 0)
local gC, gT, gS = 0, 0, 0
local releasing, short = false, false
if rate ~= nil then
  local tC, tT, tS = oDC + dC, oDT + dT, oDS + dS
  local fC = math.min(tC, shC * rate)
  local fT = math.min(tT, shT * rate, rate - fC)
  local fS = math.min(tS, shS * rate, math.max(0, rate - fC - fT))
  local spare = math.max(0, rate - fC - fT - fS)
  local head = spare / (2 * replicas)
  local weight = dC + dT + dS + 3
  local function part(f, mine, all) if all > 0 then return f * mine / all end return 0 end
  local wC = part(fC, dC, tC) + head * (dC + 1) / weight
  local wT = part(fT, dT, tT) + math.min(head * (dT + 1) / weight, math.max(0, shT * rate - fT) / replicas)
  local wS = part(fS, dS, tS) + math.min(head * (dS + 1) / weight, math.max(0, shS * rate - fS) / replicas)
  local free = math.max(0, rate - oAC - oAT - oAS)
  gC = math.min(wC, free); free = free - gC
  gT = math.min(wT, free, math.max(0, shT * rate - oAT)); free = free - gT
  gS = math.min(wS, free, math.max(0, shS * rate - oAS))
  local margin = math.max(0.5, 0.02 * rate)
  releasing = uC + uT + uS - (gC + gT + gS) > margin
  short = wC - gC + (wT - gT) > margin
end
local interval = ${FAR_INTERVAL_MS}
if near then
  if releasing then interval = ${RELEASE_INTERVAL_MS}
  elseif short then interval = ${QUICK_INTERVAL_MS}
  else interval = ${NEAR_INTERVAL_MS} end
end
local lease = now + 2 * math.max(interval, ${NEAR_INTERVAL_MS}) + 1000
local function s(n) if n == nil then return '' end return string.format('%.17g', n) end
redis.call('HSET', KEYS[1], me, table.concat({s(lease), s(dC), s(dT), s(dS), s(gC), s(gT), s(gS), s(accepted),
  s(math.max(gC, uC)), s(math.max(gT, uT)), s(math.max(gS, uS))}, ' '),
  '@learned', s(learned or 0), '@ceiling', s(ceiling or 0), '@ceilingAt', s(ceilingAt), '@lastDecrease', s(lastDecrease),
  '@raisedAt', s(raisedAt), '@pause', s(pause), '@probeUntil', s(probeUntil))
redis.call('PEXPIRE', KEYS[1], ${RECORD_TTL_MS})
local callerPause = 0
if pause > 0 then callerPause = pause - shift end
local callerLease = lease - shift
if rate == nil then
  return {'', '', '', '', s(learned), s(callerPause), won, replicas, interval, s(callerLease), repaired}
end
return {s(gC), s(gT), s(gS), s(rate), s(learned), s(callerPause), won, replicas, interval, s(callerLease), repaired}`;

export interface RedisBudgetStoreOptions {
  readonly redis: RedisClient;
  /** The account's fleet record (budgetKeys(...).fleet) and its signal channel. */
  readonly key: string;
  readonly channel: string;
  /** Publishing and subscribing as the token store does (one subscriber connection for the process). */
  readonly channels: {
    publish(channel: string, message: string): Promise<void>;
    subscribe(channel: string, listener: ChannelListener): () => void;
  };
  /**
   * The clock of the record: `redis` (default) reads Redis's TIME, one clock for every replica; `caller` takes the
   * request's `now` as is (the memory store's behaviour, which the step-by-step equality test holds it to).
   */
  readonly time?: 'redis' | 'caller';
}

export function createRedisBudgetStore(options: RedisBudgetStoreOptions): BudgetStore {
  const { redis, key, channel, channels, time = 'redis' } = options;
  return {
    kind: 'redis',
    async exchange(request) {
      const { demand, event } = request;
      const eventArg = event.kind === 'pause' ? event.until : event.kind === 'probe' ? event.leaseMs : 0;
      const reply = (await redis
        .eval(
          EXCHANGE_SCRIPT,
          1,
          key,
          request.now,
          request.replicaId,
          request.configuredRate ?? 0,
          request.shares.sheddable,
          request.shares.standard,
          request.shares.critical,
          demand.critical,
          demand.standard,
          demand.sheddable,
          request.accepted,
          event.kind,
          eventArg,
          request.using.critical,
          request.using.standard,
          request.using.sheddable,
          request.maxPauseMs,
          time,
        )
        .catch(asRecordError)) as ScriptReply;
      return readReply(reply, request.now, request.maxPauseMs);
    },
    async leave(replicaId) {
      // The field the exchange script writes for this replica (`r:<id>`): one HDEL, the shared fields untouched.
      await redis.hdel(key, `r:${replicaId}`);
    },
    publish: (signal) => channels.publish(channel, encodeSignal(signal)),
    subscribe(listener) {
      return channels.subscribe(channel, (message) => {
        const signal = decodeSignal(message);
        if (signal) listener(signal);
      });
    },
  };
}

/** Redis answered with an error (WRONGTYPE, a script error): the record's fault, not Redis's health. */
function asRecordError(error: unknown): never {
  if (error instanceof Error && error.name === 'ReplyError') throw new BudgetRecordError(error.message);
  throw error;
}

type ScriptReply = [string, string, string, string, string, string, number, number, number, string, number];

/** A number the script wrote; anything not finite (a record written by hand) reads as absent. */
function finite(text: string): number | undefined {
  const n = text === '' ? Number.NaN : Number(text);
  return Number.isFinite(n) ? n : undefined;
}

function readReply(reply: ScriptReply, now: number, maxPauseMs: number): ExchangeReply {
  const [critical, standard, sheddable, rate, learned, pause, won, replicas, interval, lease, repaired] =
    reply;
  const positive = (text: string) => {
    const n = finite(text);
    return n !== undefined && n > 0 ? n : undefined;
  };
  const effectiveRate = positive(rate);
  const rateOf = (text: string) => Math.max(0, finite(text) ?? 0);
  return {
    allocation:
      effectiveRate === undefined
        ? undefined
        : { critical: rateOf(critical), standard: rateOf(standard), sheddable: rateOf(sheddable) },
    effectiveRate,
    learnedRate: positive(learned),
    pausedUntil: Math.min(positive(pause) ?? 0, now + maxPauseMs),
    probeWon: Number(won) === 1,
    replicas: Math.max(1, Number(replicas) || 1),
    intervalMs: positive(String(interval)) ?? NEAR_INTERVAL_MS,
    leaseUntil: finite(lease) ?? now,
    repaired: Number(repaired) || 0,
  };
}
