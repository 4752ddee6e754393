/**
 * Every change to a key holds on every replica as a revoke does with Redis
 * read-only (a replica of a master that is gone): a roll, a new expiry, an
 * allowlist change, a rate-limit change, a revoke and a delete cannot remove
 * the key's entry, which stays in Redis for its whole TTL. `ctl` (a process)
 * still exits 0, confirmed through Postgres, and the change holds on the
 * gateways (processes) at once, a while later, and on a replica started later.
 */
import t from 'tap'
import { httpsClient } from '../helpers/https.js'
import { freePort } from '../helpers/processes.js'
import { get, sleep } from './support.js'
import { changeByCtl, CHANGES, fixture, LATER_MS, warmKeys } from './key-changes.js'

t.test('Redis read-only: each kind of change holds at once, later, and on a replica started later', async (t) => {
  const f = await fixture(t, 'Read-only')
  const keys = await warmKeys(t, f)
  // A replica of a master that is gone: reads, PUBLISH and SUBSCRIBE work; every write (SET, DEL, RPUSH, scripts) is refused.
  const control = f.redis.client()
  await control.call('REPLICAOF', '127.0.0.1', String(await freePort()))
  await t.rejects(control.set(`${f.stack.redis.prefix}probe`, '1'), /READONLY/, 'Redis refuses writes')

  for (const change of CHANGES) {
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
    for (const change of CHANGES) {
      const { key, captured } = keys.get(change)!
      t.equal((await f.entry(key)).text, captured, `${change.name}: the old entry is still in Redis`)
      for (const [i, client] of [...f.clients, late].entries())
        await change.holds(t, client, key, `replica ${i + 1}${i === 2 ? ' (late)' : ''}, ${change.name}`)
    }
    const bystander = await f.tenancy.subKey('bystander')
    t.equal((await get(late, '/v1/agents', bystander.key)).status, 200, 'a key nobody changed keeps working')
  })
})
