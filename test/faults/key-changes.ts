/**
 * What the key-change fault tests share (key-change-replay.test.ts,
 * key-change-read-only.test.ts): every kind of change to a key, made with
 * `ctl` as a process, with how to tell through a gateway that it holds; a
 * stack of two replicas on a Redis of the test's own; and one key per
 * change, warm on every replica, with its genuine Redis entry captured.
 */
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

export const CHANGES: Change[] = [
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
export async function warmKeys(t: Test, f: Fixture): Promise<Map<Change, { key: CreatedKey; captured: string }>> {
  const keys = new Map<Change, { key: CreatedKey; captured: string }>()
  for (const change of CHANGES) {
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
