/**
 * The revocation API's allowance shared by agency-service replicas: two apps
 * in this process, on one database and one Redis, give a client one
 * allowance (60 an hour, plus at most one report per other replica), counted
 * under a hashed Redis key; a replica whose Redis cannot be reached still
 * holds each client to the allowance on its own count, answers the reports
 * within it as ever (202, the same body), and warns that it counts alone;
 * the Redis user docs/operations.md gives agency-service may count.
 */
import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import { clientGroup } from '@scoped/shared/ip-address'
import { generateKey } from '@scoped/shared/keys'
import { createNonceRedis } from '@scoped/shared/nonce-store'
import type { NonceRedis } from '@scoped/shared/nonce-store'
import { buildAgencyApp } from '@scoped/agency-service/app'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { REPORTS_PER_HOUR, ReportThrottle } from '@scoped/agency-service/leaks/report-throttle'
import { createTestDatabase } from '../helpers/database.js'
import { freePort } from '../helpers/processes.js'
import { createTestRedis } from '../helpers/redis.js'
import { startRedisServer } from '../helpers/redis-server.js'
import { createTestTenants } from '../helpers/tenants.js'
import { waitFor } from '../helpers/wait-for.js'
import { fromClient } from './support.js'

const REVOKE = '/v1/credentials/revoke'

const db = await createTestDatabase(t)
const redis = await createTestRedis(t)
const invalidator = createKeyInvalidator(
  db.pool,
  { redisUrl: redis.url, redisKeyPrefix: redis.prefix, keyCacheSecret: randomBytes(32) },
  'report-throttle-test',
)
t.teardown(() => invalidator.close())
const keys = new KeyService(db.pool, invalidator)
const tenants = await createTestTenants(db.pool, 'Reported')
const secret = randomBytes(32).toString('hex')

function nonceRedis(url: string): NonceRedis {
  const shared = createNonceRedis(url, redis.prefix, 'agency-service')
  t.teardown(() => shared.client.disconnect())
  return shared
}

/** One agency-service replica, its Redis the given one, its warnings kept in `warnings`. */
async function replica(shared: NonceRedis, warnings: string[] = []): Promise<FastifyInstance> {
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) })
  const app = await buildAgencyApp({ pool: db.pool, keys, logger, signingSecrets: [secret], nonceRedis: shared })
  t.teardown(() => app.close())
  return app
}

function report(target: FastifyInstance, address: string, credentials: string[] = [generateKey()]) {
  return target.inject({
    method: 'POST',
    url: REVOKE,
    headers: { 'content-type': 'application/json', ...fromClient(secret, REVOKE, address) },
    payload: JSON.stringify({ credentials }),
  })
}

/** The shared count of a client, as Redis holds it. */
async function sharedCount(address: string): Promise<number> {
  return Number((await redis.client.get(new ReportThrottle({ prefix: redis.prefix }).redisKey(clientGroup(address)))) ?? 0)
}

t.test('two replicas sharing Redis give a client one allowance, and both refuse it past it', async (t) => {
  const connections = [nonceRedis(redis.url), nonceRedis(redis.url)]
  // Each connects in the background; until it has, a replica counts alone (the next test).
  await waitFor(() => connections.every((connection) => connection.client.status === 'ready'), 'both replicas connected to Redis')
  const replicas = await Promise.all(connections.map((connection) => replica(connection)))
  const client = '2001:db8:7:7::1'
  let admitted = 0
  for (let i = 0; i < REPORTS_PER_HOUR + 4; i++) {
    // One client spreading its reports over both replicas (and over its /64).
    const response = await report(replicas[i % 2]!, `2001:db8:7:7::${(i + 1).toString(16)}`)
    if (response.statusCode === 202) {
      admitted++
      t.same(response.json(), { success: true })
      // Each replica counts in Redis without making the report wait: wait here until the count is in.
      await waitFor(async () => (await sharedCount(client)) === admitted, `the shared count reaching ${admitted}`)
    } else {
      t.equal(response.statusCode, 429, `report ${i + 1}`)
    }
  }
  t.ok(admitted >= REPORTS_PER_HOUR && admitted <= REPORTS_PER_HOUR + 1, `${admitted} reports admitted: one allowance, plus at most one per other replica`)
  for (const [index, app] of replicas.entries()) {
    const refused = await report(app, '2001:db8:7:7::abcd')
    t.equal(refused.statusCode, 429, `replica ${index + 1} refuses the client`)
    t.same(refused.json(), { success: false, message: 'Rate limit exceeded' })
    t.ok(Number(refused.headers['retry-after']) > 3_500, 'until the hour is over')
    t.equal((await report(app, '2001:db8:7:8::1')).statusCode, 202, `replica ${index + 1} admits another client`)
  }
  const reported = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 'reported by the throttled client', 'report-throttle-test')
  t.equal((await report(replicas[0]!, client, [reported.key])).statusCode, 429)
  t.equal((await keys.find(reported.id))?.status, 'active', 'a refused report revokes nothing')

  const counters = await redis.client.keys(`${redis.prefix}leak-report:*`)
  t.equal(counters.length, 2, 'one counter per client')
  for (const counter of counters) {
    t.match(counter, new RegExp(`^${redis.prefix}leak-report:[0-9a-f]{64}$`), 'a SHA-256, never the address')
    const ttl = await redis.client.pttl(counter)
    t.ok(ttl > 0 && ttl <= 3_600_000, 'it expires with the hour')
  }
})

t.test('Redis unreachable: a replica still holds each client to the allowance, answers alike, and warns', async (t) => {
  const warnings: string[] = []
  const down = nonceRedis(`redis://127.0.0.1:${await freePort()}`) // nothing listens there
  const app = await replica(down, warnings)
  const active = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 'reported while Redis is down', 'report-throttle-test')
  for (let i = 0; i < REPORTS_PER_HOUR; i++) {
    const response = await report(app, '198.51.100.44', i === 0 ? [active.key] : undefined)
    t.same([response.statusCode, response.json()], [202, { success: true }], `report ${i + 1}`)
  }
  t.equal((await keys.find(active.id))?.status, 'revoked', 'a report within the allowance revokes as ever')
  const refused = await report(app, '198.51.100.44')
  t.equal(refused.statusCode, 429, 'the next is refused on this replica’s own count')
  t.same(refused.json(), { success: false, message: 'Rate limit exceeded' })
  t.equal((await report(app, '198.51.100.45')).statusCode, 202, 'another client goes on')
  const warned = await waitFor(
    () =>
      warnings
        .map((line) => JSON.parse(line) as { msg: string; failedUpdates: number })
        .find((line) => line.msg.startsWith('leaked-key reports: Redis unavailable')),
    'the warning',
  )
  t.ok(warned.failedUpdates >= 1)
  const repeated = warnings.filter((line) => line.includes('Redis unavailable')).length
  t.ok(repeated < REPORTS_PER_HOUR / 2, `${repeated} warning(s) for ${REPORTS_PER_HOUR + 1} failed updates: at most one a minute, not one per report`)
})

t.test('the Redis user of docs/operations.md may count reports', async (t) => {
  const server = await startRedisServer(t)
  // What docs/operations.md adds to agency-service's user for the allowance (with its nonces), under the test's prefix.
  const rights = [
    ...['resetkeys', `~${redis.prefix}leak-report:*`, `~${redis.prefix}nonce:agency-service:*`, 'resetchannels', '-@all'],
    ...['+eval', '+incr', '+pttl', '+pexpire', '+set', '+info', '+client|setname'],
  ]
  await server.client().call('ACL', 'SETUSER', 'agency-service', 'on', '>report-password', ...rights)
  const connection = nonceRedis(`redis://agency-service:report-password@127.0.0.1:${server.port}`)
  await waitFor(() => connection.client.status === 'ready', 'the restricted user connected')
  const warnings: string[] = []
  const app = await replica(connection, warnings)
  t.equal((await report(app, '192.0.2.77')).statusCode, 202)
  const counter = new ReportThrottle({ prefix: redis.prefix }).redisKey(clientGroup('192.0.2.77'))
  await waitFor(async () => (await server.client().get(counter)) === '1', 'the report counted in Redis')
  t.same(warnings, [], 'no Redis error')
})
