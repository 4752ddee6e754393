/**
 * When Postgres or Redis fail: a key check that cannot be made is 503 (never
 * 200, never a 401 that blames the key); Redis is only a cache, so without it
 * keys are checked against Postgres; and a replica that lost its invalidation
 * channel never serves a key from memory that it may have missed a revoke for.
 */
import t from 'tap'
import { createServer, connect } from 'node:net'
import type { Server, Socket } from 'node:net'
import { errorCatalog } from '@scoped/shared/errors'
import { generateKey, hashKey } from '@scoped/shared/keys'
import { redisNames } from '@scoped/shared/key-invalidation'
import { freePort, runCtl } from '../helpers/processes.js'
import { gatewayFixture } from './fixture.js'

/** A TCP proxy to Postgres that the test can cut and restore, on a fixed port. */
async function postgresProxy(t: { teardown(fn: () => unknown): void }): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void> }> {
  const target = new URL(fixture.db.url)
  const port = await freePort()
  const sockets = new Set<Socket>()
  let server: Server | undefined
  const listen = (): Promise<void> =>
    new Promise((resolve) => {
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname)
        for (const socket of [client, upstream]) {
          sockets.add(socket)
          socket.on('close', () => sockets.delete(socket))
          socket.on('error', () => undefined)
        }
        client.pipe(upstream).pipe(client)
      })
      server.listen(port, '127.0.0.1', resolve)
    })
  const cut = (): Promise<void> =>
    new Promise((resolve) => {
      for (const socket of sockets) socket.destroy()
      server?.close(() => resolve())
    })
  await listen()
  t.teardown(cut)
  return { port, cut, restore: listen }
}

const fixture = await gatewayFixture(t)
/** Replicas in this file run without Redis unless a test says otherwise, so every key check reaches Postgres. */
const noRedis = { REDIS_URL: '', REDIS_KEY_PREFIX: '' }

t.test('Postgres unreachable: 503 in the envelope, never 200 or 401; back to normal when it returns', async (t) => {
  const proxy = await postgresProxy(t)
  const url = new URL(fixture.db.url)
  url.port = String(proxy.port)
  const key = await fixture.createKey('sub-account', 'pg down')
  const replica = await fixture.startReplica({ ...noRedis, DATABASE_URL: url.href })
  const get = (presented: string) => replica.client.request('/v1/agents', { headers: { 'x-api-key': presented } })
  t.equal((await get(key.key)).status, 200, 'works while Postgres is there')

  await proxy.cut()
  for (const [name, presented] of [
    ['a valid key', key.key],
    ['an unknown key', generateKey()],
  ] as const) {
    const response = await get(presented)
    t.equal(response.status, 503, `${name}: 503`)
    t.same(response.json, { success: false, message: errorCatalog.authUnavailable.message })
    t.notOk(response.headers['www-authenticate'], 'not a key problem')
  }
  const ready = await fetch(`http://127.0.0.1:${replica.ports.admin}/readyz`)
  t.equal(ready.status, 503, 'not ready')
  t.match(await ready.json(), { checks: { postgres: false } })

  await proxy.restore()
  t.equal((await get(key.key)).status, 200, 'recovers by itself')
})

t.test('Postgres unreachable from the start: the gateway starts, and answers 503', async (t) => {
  const replica = await fixture.startReplica({ ...noRedis, DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/nowhere` })
  const response = await replica.client.request('/v1/agents', { headers: { 'x-api-key': generateKey() } })
  t.equal(response.status, 503)
  t.equal(response.json?.message, errorCatalog.authUnavailable.message)
})

t.test('Redis unreachable: keys are checked against Postgres, revocation still holds', async (t) => {
  const replica = await fixture.startReplica({ REDIS_URL: `redis://127.0.0.1:${await freePort()}`, REDIS_KEY_PREFIX: 'sak-test-nowhere:' })
  const key = await fixture.createKey('agency', 'redis down')
  const get = () => replica.client.request('/v1/agency', { headers: { authorization: `Bearer ${key.key}` } })
  t.equal((await get()).status, 200)
  t.equal((await get()).status, 200)
  t.equal((await runCtl(['key', 'revoke', key.id], fixture.ctlEnv)).status, 0)
  t.equal((await get()).status, 401, 'the in-process cache was not trusted without a channel')
  const ready = await fetch(`http://127.0.0.1:${replica.ports.admin}/readyz`)
  t.equal(ready.status, 503)
  t.match(await ready.json(), { checks: { cache: false, postgres: true } })
})

t.test('a replica that lost its invalidation channel drops its in-process cache', async (t) => {
  const redis = fixture.redis!
  const replica = await fixture.startReplica()
  const key = await fixture.createKey('sub-account', 'missed message')
  const get = () => replica.client.request('/v1/agents', { headers: { 'x-api-key': key.key } })
  t.equal((await get()).status, 200)
  t.equal((await get()).status, 200, 'warm in memory')

  // A revoke this replica never hears about: Postgres and the Redis marker change, no message arrives…
  await fixture.db.pool.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = 'test' WHERE id = $1`, [key.id])
  await redis.client.set(redisNames(redis.prefix).cacheEntry(hashKey(key.key)), JSON.stringify({ status: 'revoked' }), 'EX', 60)
  // …because its subscriber connection is cut.
  const pid = replica.process.child.pid!
  const clients = (await redis.client.client('LIST')) as string
  const subscriber = clients.split('\n').find((line) => line.includes(`name=gateway-subscriber-`) && line.includes(`-${pid}-`))
  t.ok(subscriber, 'found the replica’s subscriber connection')
  const id = /id=(\d+)/.exec(subscriber ?? '')?.[1]
  await redis.client.client('KILL', 'ID', id!)
  const deadline = Date.now() + 5_000
  while (!replica.process.output().includes('key invalidation channel lost') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  t.match(replica.process.output(), /key invalidation channel lost/)
  const after = await get()
  t.equal(after.status, 401, 'not served from memory')
  t.equal(after.json?.message, errorCatalog.revokedKey.message)
})
