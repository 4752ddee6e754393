/**
 * What the key-change fault tests share (key-change-replay.test.ts,
 * key-change-read-only.test.ts): every kind of change to a key, made with
 * `ctl` as a process, with how to tell through a gateway that it holds; a
 * stack of two replicas on a Redis of the test's own; one key per change,
 * warm on every replica, with its genuine Redis entry captured; and the two
 * tests, each run by two files (the changes that end a key, and those of its
 * limits) so that each file stays well within the test timeout on a busy
 * machine.
 */
import t from 'tap'
import type { Test } from 'tap'
import type { Pool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyStateCodec, redisNames } from '@scoped/shared/key-state'
import { hashKey } from '@scoped/shared/keys'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import type { PrivateRedis } from '../helpers/redis-server.js'
import { startRedisServer } from '../helpers/redis-server.js'
import type { Stack } from '../helpers/stack.js'
import { startStack } from '../helpers/stack.js'
import { waitFor } from '../helpers/wait-for.js'
import type { Tenancy } from './support.js'
import { freePort } from '../helpers/processes.js'
import { COMMAND_LIMIT_MS, createTenancy, get, REVOKED, sleep, timedCtl } from './support.js'

/** How long after the changes they are tried again (many times the revocation bound). */
export const LATER_MS = 6_000

export interface Change {
  name: string
  /** The ctl command that makes the change. */
  args: (key: CreatedKey) => string[]
  /** Checks, through `client`, that the key acts as changed (several requests where one would not tell). */
  holds: (t: Test, client: HttpsClient, key: CreatedKey, where: string) => Promise<void>
  /** Waits, if the change takes effect later (a grace period), until it has. */
  settle?: (pool: Pool, key: CreatedKey) => Promise<void>
}

async function refusedAs(t: Test, client: HttpsClient, key: CreatedKey, where: string, status: number, message: string): Promise<void> {
  const response = await get(client, '/v1/agents', key.key)
  t.equal(response.status, status, where)
  t.equal(response.json?.message, message, `${where}: ${message}`)
}

/** Until the key's stored expiry has passed (by the test's clock, which the gateways share). */
async function pastExpiry(pool: Pool, key: CreatedKey): Promise<void> {
  const { rows } = await pool.query<{ expires_at: Date }>(`SELECT expires_at FROM api_keys WHERE id = $1`, [key.id])
  const wait = rows[0]!.expires_at.getTime() - Date.now() + 50
  if (wait > 0) await sleep(wait)
}

const CHANGES: Change[] = [
  {
    name: 'roll',
    args: (key) => ['key', 'roll', key.id],
    holds: (t, client, key, where) => refusedAs(t, client, key, where, 401, REVOKED),
  },
  {
    name: 'expiry (a roll with a grace period)',
    args: (key) => ['key', 'roll', key.id, '--grace', '3s'],
    settle: pastExpiry,
    holds: (t, client, key, where) => refusedAs(t, client, key, where, 401, REVOKED),
  },
  {
    name: 'allowlist',
    args: (key) => ['key', 'update', key.id, '--allow-cidr', '10.9.9.9/32'],
    holds: (t, client, key, where) => refusedAs(t, client, key, where, 403, errorCatalog.addressNotAllowed.message),
  },
  {
    name: 'rate limit',
    args: (key) => ['key', 'update', key.id, '--rate', '0.001', '--burst', '1'],
    holds: async (t, client, key, where) => {
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) statuses.push((await get(client, '/v1/agents', key.key)).status)
      t.ok(statuses.includes(429), `${where}: the new limit is counted (${statuses.join(', ')})`)
    },
  },
  {
    name: 'revoke',
    args: (key) => ['key', 'revoke', key.id],
    holds: (t, client, key, where) => refusedAs(t, client, key, where, 401, REVOKED),
  },
  {
    name: 'delete',
    args: (key) => ['key', 'delete', key.id],
    holds: (t, client, key, where) => refusedAs(t, client, key, where, 401, REVOKED),
  },
]

export interface Fixture {
  stack: Stack
  clients: HttpsClient[]
  tenancy: Tenancy
  /** The Redis entry of a key, as the gateways read it: its text, and what it says. */
  entry(key: CreatedKey): Promise<{ text: string | null; status: string; version?: number }>
  write(key: CreatedKey, text: string): Promise<void>
}

export async function fixture(t: Test, name: string): Promise<Fixture & { redis: PrivateRedis }> {
  const redis = await startRedisServer(t)
  // The backends keep their nonces in their own memory: this Redis is about to refuse writes.
  const stack = await startStack(t, { replicas: 2, redis: { url: redis.url }, backendEnv: { agency: { REDIS_URL: '' }, resource: { REDIS_URL: '' } } })
  const codec = new KeyStateCodec(readKeyCacheSecret({ TENANT_SIGNING_SECRET: stack.secret })!)
  const names = redisNames(stack.redis.prefix)
  const control = redis.client()
  return {
    redis,
    stack,
    clients: stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert)),
    tenancy: await createTenancy(stack.db.pool, name),
    async entry(key) {
      const hash = hashKey(key.key)
      const text = await control.get(names.cacheEntry(hash))
      if (text === null) return { text, status: 'absent' }
      const state = codec.decodeEntry(hash, text, Date.now())
      return { text, status: state?.status ?? 'forged', ...(state?.status === 'active' ? { version: state.version } : {}) }
    },
    async write(key, text) {
      await control.set(names.cacheEntry(hashKey(key.key)), text, 'EX', 300)
    },
  }
}

/** One key per change, used on every replica, until its genuine active entry (version 1) is in Redis; that entry's text. */
export async function warmKeys(t: Test, f: Fixture, changes: Change[]): Promise<Map<Change, { key: CreatedKey; captured: string }>> {
  const keys = new Map<Change, { key: CreatedKey; captured: string }>()
  for (const change of changes) {
    const key = await f.tenancy.subKey(change.name)
    for (const client of f.clients) t.equal((await get(client, '/v1/agents', key.key)).status, 200, `${change.name}: works before the change`)
    const entry = await waitFor(async () => {
      const found = await f.entry(key)
      return found.status === 'active' && found
    }, `the genuine active entry of the ${change.name} key to be in Redis`)
    t.equal(entry.version, 1, `${change.name}: the entry carries the key's state version`)
    keys.set(change, { key, captured: entry.text! })
  }
  return keys
}

export async function changeByCtl(t: Test, f: Fixture, change: Change, key: CreatedKey): Promise<void> {
  const result = await timedCtl(change.args(key), f.stack.ctlEnv, f.stack.db)
  t.comment(`ctl ${change.args(key)[1]} (${change.name}): ${result.workMs} ms (${result.ms} ms with the process start), exit ${result.status}`)
  t.equal(result.status, 0, `ctl exited 0: ${result.stderr.trim()}`)
  t.ok(result.workMs < COMMAND_LIMIT_MS, `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${result.workMs} ms)`)
}

/** The changes that end a key (401 from then on): a roll, a roll's expiry, a revoke, a delete. */
export const ENDING_CHANGES: Change[] = CHANGES.filter((change) => ['roll', 'expiry (a roll with a grace period)', 'revoke', 'delete'].includes(change.name))
/** The changes of a key's limits: its allowlist (403 from elsewhere) and its rate limit (429 past it). */
export const LIMIT_CHANGES: Change[] = CHANGES.filter((change) => ['allowlist', 'rate limit'].includes(change.name))

/** For each of `changes`: the key's captured entry, written back right after the change, is never believed (nor by a replica started later). */
export function replayedEntryTest(changes: Change[]): void {
  t.test('a captured entry written back after each kind of change is never believed', async (t) => {
    const f = await fixture(t, 'Replayed')
    const keys = await warmKeys(t, f, changes)
    for (const change of changes) {
      await t.test(change.name, async (t) => {
        const { key, captured } = keys.get(change)!
        await changeByCtl(t, f, change, key)
        // Written back at once, before any request could look the key up again.
        await f.write(key, captured)
        await change.settle?.(f.stack.db.pool, key)
        for (const [i, client] of f.clients.entries()) await change.holds(t, client, key, `replica ${i + 1}, the old entry written back`)
      })
    }
    await t.test('written back again, read by a replica started after the changes', async (t) => {
      for (const { key, captured } of keys.values()) await f.write(key, captured)
      const late = httpsClient(t, (await f.stack.startReplica()).port, f.stack.cert)
      for (const change of changes) await change.holds(t, late, keys.get(change)!.key, `late replica, ${change.name}`)
      const bystander = await f.tenancy.subKey('bystander')
      t.equal((await get(late, '/v1/agents', bystander.key)).status, 200, 'a key nobody changed keeps working')
    })
  })
}

/** For each of `changes`, with Redis read-only: ctl exits 0, and the change holds at once, later, and on a replica started later. */
export function readOnlyRedisTest(changes: Change[]): void {
  t.test('Redis read-only: each kind of change holds at once, later, and on a replica started later', async (t) => {
    const f = await fixture(t, 'Read-only')
    const keys = await warmKeys(t, f, changes)
    // A replica of a master that is gone: reads, PUBLISH and SUBSCRIBE work; every write (SET, DEL, RPUSH, scripts) is refused.
    const control = f.redis.client()
    await control.call('REPLICAOF', '127.0.0.1', String(await freePort()))
    await t.rejects(control.set(`${f.stack.redis.prefix}probe`, '1'), /READONLY/, 'Redis refuses writes')

    for (const change of changes) {
      await t.test(change.name, async (t) => {
        const { key, captured } = keys.get(change)!
        await changeByCtl(t, f, change, key)
        t.equal((await f.entry(key)).text, captured, 'the old entry is still in Redis (nothing could remove it)')
        await change.settle?.(f.stack.db.pool, key)
        for (const [i, client] of f.clients.entries()) await change.holds(t, client, key, `replica ${i + 1}, the very next request`)
      })
    }
    await t.test(`${LATER_MS / 1000} s later, and on a replica started after the changes`, async (t) => {
      await sleep(LATER_MS)
      const late = httpsClient(t, (await f.stack.startReplica()).port, f.stack.cert)
      for (const change of changes) {
        const { key, captured } = keys.get(change)!
        t.equal((await f.entry(key)).text, captured, `${change.name}: the old entry is still in Redis`)
        for (const [i, client] of [...f.clients, late].entries())
          await change.holds(t, client, key, `replica ${i + 1}${i === 2 ? ' (late)' : ''}, ${change.name}`)
      }
      const bystander = await f.tenancy.subKey('bystander')
      t.equal((await get(late, '/v1/agents', bystander.key)).status, 200, 'a key nobody changed keeps working')
    })
  })
}
