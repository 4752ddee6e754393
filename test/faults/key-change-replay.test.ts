/**
 * Every change to a key holds on every replica as a revoke does, whatever is
 * written back to Redis: for a roll, a new expiry (a roll's grace period), an
 * allowlist change, a rate-limit change, a revoke and a delete (ctl as a
 * process, gateways as processes), the key's genuine "active" entry,
 * captured from Redis before the change, is written back right after it (as
 * someone with write access to Redis, or a lookup that raced the change,
 * would). No replica believes it: not the two that served the key before,
 * not one started after the change. (key-change-read-only.test.ts: the same
 * changes with Redis refusing writes.)
 */
import t from 'tap'
import { httpsClient } from '../helpers/https.js'
import { get } from './support.js'
import { changeByCtl, CHANGES, fixture, warmKeys } from './key-changes.js'

t.test('a captured entry written back after each kind of change is never believed', async (t) => {
  const f = await fixture(t, 'Replayed')
  const keys = await warmKeys(t, f)
  for (const change of CHANGES) {
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
    for (const change of CHANGES) await change.holds(t, late, keys.get(change)!.key, `late replica, ${change.name}`)
    const bystander = await f.tenancy.subKey('bystander')
    t.equal((await get(late, '/v1/agents', bystander.key)).status, 200, 'a key nobody changed keeps working')
  })
})
