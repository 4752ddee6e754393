/**
 * The gateway's in-process key cache (times are milliseconds of the cache's
 * monotonic clock, given by hand here):
 * - ended keys (revoked, deleted) are served whether or not the cache is
 *   current, and a flood of other keys cannot push them out;
 * - active keys are stored and served only while the cache is current (the
 *   invalidation log follower says so), and all of them go when currency lapses;
 * - unknown keys are remembered for a while, bounded;
 * - a fill is skipped when the generation moved while its lookup was in flight;
 * - a change pins the version it made: older states are refused, as long as
 *   an ended entry lives; pins beyond the bound make Redis untrusted instead.
 */
import t from 'tap'
import type { KeyState } from '@scoped/shared/key-state'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { defaultKeyCacheOptions, ENDED_TTL_MS, KeyCache } from '@scoped/gateway/key-cache'
import type { KeyCacheOptions } from '@scoped/gateway/key-cache'

const owner: Tenant = { scope: 'SUB-ACCOUNT', agencyId: 'agency', subAccountId: 'sub', keyId: 'key' }
const active: KeyState = { status: 'active', tenant: owner }
const unknown: KeyState = { status: 'unknown' }
const options: KeyCacheOptions = { activeTtlMs: 60_000, unknownTtlMs: 30_000, endedTtlMs: 900_000, maxEntries: 4, maxEnded: 100 }

/** A cache the follower made current until `until`. */
function currentCache(until: number, overrides: Partial<KeyCacheOptions> = {}): KeyCache {
  const cache = new KeyCache({ ...options, ...overrides })
  cache.currentUntilTime(until)
  return cache
}

t.test('the defaults: ended keys are kept longer than any Redis active entry can live', async (t) => {
  t.equal(defaultKeyCacheOptions.endedTtlMs, ENDED_TTL_MS)
  t.ok(ENDED_TTL_MS > 300_000 * 2, 'well past the 300 s of a Redis active entry')
  t.ok(defaultKeyCacheOptions.maxEnded >= defaultKeyCacheOptions.maxEntries)
})

t.test('ended keys are served without currency, until their TTL', async (t) => {
  const cache = new KeyCache(options)
  t.notOk(cache.isCurrent(0), 'never current until the follower says so')
  cache.end('revoked', 'revoked', 0)
  t.ok(cache.fill('deleted', { status: 'deleted' }, cache.generation, 0), 'a lookup that found a key deleted is stored, current or not')
  t.same(cache.get('revoked', 1), { status: 'revoked' })
  t.same(cache.get('deleted', 1), { status: 'deleted' })
  t.same(cache.get('revoked', options.endedTtlMs - 1), { status: 'revoked' }, 'until the last millisecond of its TTL')
  t.equal(cache.get('revoked', options.endedTtlMs), undefined, 'then forgotten')
  t.same(cache.size(), { active: 0, unknown: 0, ended: 1 }, 'and removed')
})

t.test('ended keys survive a flood of unknown and active keys beyond maxEntries', async (t) => {
  const cache = currentCache(1_000_000)
  for (let i = 0; i < 3; i++) cache.end(`ended-${i}`, i % 2 === 0 ? 'revoked' : 'deleted', 0)
  let stored = 0
  for (let i = 0; i < 1_000; i++) {
    if (cache.fill(`unknown-${i}`, unknown, cache.generation, 1)) stored++
    if (cache.fill(`active-${i}`, active, cache.generation, 1)) stored++
  }
  t.equal(stored, 2_000, 'every fill was taken')
  t.same(cache.size(), { active: options.maxEntries, unknown: options.maxEntries, ended: 3 }, 'the others are bounded; the ended keys all stay')
  for (let i = 0; i < 3; i++) t.same(cache.get(`ended-${i}`, 2), { status: i % 2 === 0 ? 'revoked' : 'deleted' }, `ended-${i} still refused`)
  t.equal(cache.get('unknown-0', 2), undefined, 'the oldest unknown key went')
  t.same(cache.get('unknown-999', 2), unknown, 'the newest stayed')
  t.equal(cache.get('active-0', 2), undefined, 'the oldest active key went')
  t.same(cache.get('active-999', 2), active, 'the newest stayed')
})

t.test('ended keys are bounded on their own (maxEnded), oldest first', async (t) => {
  const cache = new KeyCache({ ...options, maxEnded: 2 })
  for (const hash of ['one', 'two', 'three']) cache.end(hash, 'revoked', 0)
  t.same(cache.size().ended, 2)
  t.equal(cache.get('one', 1), undefined)
  t.same(cache.get('three', 1), { status: 'revoked' })
})

t.test('an ended key is never served as anything else', async (t) => {
  const cache = currentCache(1_000_000)
  t.ok(cache.fill('h', active, cache.generation, 0))
  cache.end('h', 'revoked', 1)
  const revoked = { status: 'revoked', tenant: owner }
  t.same(cache.get('h', 2), revoked, 'the active entry is replaced (its owner kept, for its usage)')
  t.ok(cache.fill('h', active, cache.generation, 3), 'a later stale fill may be stored…')
  t.same(cache.get('h', 4), revoked, '…but the ended entry is what is served')
  cache.forget('h')
  t.same(cache.get('h', 5), revoked, 'forgetting a key (its record changed) does not un-end it')
  t.ok(cache.fill('u', unknown, cache.generation, 0))
  cache.end('u', 'deleted', 1)
  t.same(cache.get('u', 2), { status: 'deleted' }, 'nor does an unknown entry hide it')
})

t.test('a revoked key keeps its owner, for its usage; a deleted key has none', async (t) => {
  const other: Tenant = { scope: 'AGENCY', agencyId: 'agency', subAccountId: null, keyId: 'other' }
  const cache = currentCache(1_000_000)
  cache.end('told', 'revoked', 0)
  t.same(cache.get('told', 1), { status: 'revoked' }, 'revoked by a message that does not say whose: no owner')
  cache.end('told', 'revoked', 2, owner)
  t.same(cache.get('told', 3), { status: 'revoked', tenant: owner }, 'the log says whose it is: taken')
  cache.end('told', 'revoked', 4)
  t.same(cache.get('told', 5), { status: 'revoked', tenant: owner }, 'a later message without it does not lose it')
  t.ok(cache.fill('looked-up', { status: 'revoked' }, cache.generation, 0))
  t.ok(cache.fill('looked-up', { status: 'revoked', tenant: other }, cache.generation, 1), 'an owner from Postgres fills in a marker without one')
  t.same(cache.get('looked-up', 2), { status: 'revoked', tenant: other })
  t.ok(cache.fill('gone', active, cache.generation, 0))
  cache.end('gone', 'deleted', 1)
  t.same(cache.get('gone', 2), { status: 'deleted' }, 'a deleted key keeps no owner, even one that was active here')
  cache.end('gone', 'revoked', 3, owner)
  t.same(cache.get('gone', 4), { status: 'deleted' }, 'news of its earlier revoke arriving late neither revives its owner nor un-deletes it')
  t.ok(cache.fill('gone', { status: 'revoked', tenant: owner }, cache.generation, 5))
  t.same(cache.get('gone', 6), { status: 'deleted' }, 'nor does a lookup that raced the delete')
})

t.test('active keys are stored and served only while the cache is current', async (t) => {
  const cache = new KeyCache(options)
  t.notOk(cache.fill('h', active, cache.generation, 0), 'not current: no active entry is stored')
  t.equal(cache.get('h', 0), undefined)
  t.same(cache.size().active, 0)

  cache.currentUntilTime(1_000)
  t.ok(cache.isCurrent(999), 'current until the time the follower gave')
  t.ok(cache.fill('h', active, cache.generation, 0))
  t.ok(cache.fill('i', active, cache.generation, 0))
  t.same(cache.get('h', 999), active, 'served while current')
  t.ok(cache.fill('u', unknown, cache.generation, 0))

  const generation = cache.generation
  t.equal(cache.get('h', 1_000), undefined, 'not at the moment currency lapses')
  t.equal(cache.generation, generation + 1, 'losing currency moves the generation')
  t.same(cache.size(), { active: 0, unknown: 1, ended: 0 }, 'every active entry is dropped, not just the one asked for')
  t.notOk(cache.isCurrent(1_000))
  t.equal(cache.get('i', 1_001), undefined)
  t.same(cache.get('u', 1_001), unknown, 'unknown entries do not depend on currency')

  cache.currentUntilTime(5_000)
  t.equal(cache.get('i', 1_002), undefined, 'current again: what was dropped stays dropped')
  t.ok(cache.fill('i', active, cache.generation, 1_002))
  t.same(cache.get('i', 1_003), active)
})

t.test('currency never moves backwards; lose() ends it at once', async (t) => {
  const cache = currentCache(10_000)
  cache.currentUntilTime(5_000)
  t.ok(cache.isCurrent(9_999), 'an older poll does not shorten it')
  t.ok(cache.fill('h', active, cache.generation, 0))
  const generation = cache.generation
  cache.lose()
  t.notOk(cache.isCurrent(1), 'the follower stopped: not current')
  t.equal(cache.generation, generation + 1)
  t.equal(cache.get('h', 1), undefined)
  t.same(cache.size().active, 0)
  t.notOk(cache.fill('h', active, cache.generation, 1))
})

t.test('an active entry lives activeTtlMs at most, even while current', async (t) => {
  const cache = currentCache(Number.MAX_SAFE_INTEGER)
  t.ok(cache.fill('h', active, cache.generation, 0))
  t.same(cache.get('h', options.activeTtlMs - 1), active)
  t.equal(cache.get('h', options.activeTtlMs), undefined)
})

t.test('unknown keys are remembered unknownTtlMs, current or not', async (t) => {
  const cache = new KeyCache(options)
  t.ok(cache.fill('u', unknown, cache.generation, 0))
  t.same(cache.get('u', options.unknownTtlMs - 1), unknown)
  t.equal(cache.get('u', options.unknownTtlMs), undefined)
  t.same(cache.size().unknown, 0)
})

t.test('a fill is skipped when the generation moved while its lookup was in flight', async (t) => {
  const moves: Array<[string, (cache: KeyCache) => void]> = [
    ['another key ended', (cache) => cache.end('other', 'revoked', 0)],
    ['this key ended', (cache) => cache.end('h', 'revoked', 0)],
    ['another key forgotten', (cache) => cache.forget('other')],
    ['currency lost', (cache) => cache.lose()],
    ['currency lapsed', (cache) => cache.isCurrent(2_000_000)],
  ]
  for (const [name, move] of moves) {
    for (const state of [active, unknown]) {
      const cache = currentCache(1_000_000)
      const generation = cache.generation
      move(cache)
      t.not(cache.generation, generation, `${name}: the generation moved`)
      cache.currentUntilTime(3_000_000)
      t.notOk(cache.fill('h', state, generation, 1), `${name}: a ${state.status} fill is skipped`)
      t.not(cache.get('h', 2)?.status, state.status, `${name}: and not served`)
      t.ok(cache.fill('h', state, cache.generation, 1), `${name}: a fill from a lookup that started after it is stored`)
    }
  }
  const cache = currentCache(1_000_000)
  const generation = cache.generation
  t.ok(cache.fill('x', unknown, generation, 0))
  t.ok(cache.fill('y', { status: 'revoked' }, generation, 0))
  t.equal(cache.generation, generation, 'filling, even an ended state, does not move it: concurrent lookups are not spoiled')
  t.ok(cache.fill('z', active, generation, 0))
})

t.test('forget drops what is cached for a key, so the next request reads it again', async (t) => {
  const cache = currentCache(1_000_000)
  t.ok(cache.fill('h', active, cache.generation, 0))
  t.ok(cache.fill('u', unknown, cache.generation, 0))
  t.ok(cache.fill('other', active, cache.generation, 0))
  const generation = cache.generation
  cache.forget('h')
  cache.forget('u')
  t.equal(cache.generation, generation + 2, 'each forget moves the generation')
  t.equal(cache.get('h', 1), undefined)
  t.equal(cache.get('u', 1), undefined)
  t.same(cache.get('other', 1), active, 'other keys stay')
  cache.forget('never-seen')
  t.same(cache.size(), { active: 1, unknown: 0, ended: 0 })
})

t.test('a change pins its version: older states are neither stored nor believed from Redis, for endedTtlMs', async (t) => {
  const cache = currentCache(10_000_000)
  const v = (version: number): KeyState => ({ ...active, version }) as KeyState
  t.ok(cache.fill('h', v(1), cache.generation, 0))
  const generation = cache.generation
  cache.changed('h', 3, 10)
  t.not(cache.generation, generation, 'a change moves the generation')
  t.equal(cache.get('h', 11), undefined, 'and forgets the key')
  for (const [version, stale] of [
    [0, true],
    [2, true],
    [3, false],
    [4, false],
  ] as const) {
    t.equal(cache.isStale('h', version, 11), stale, `version ${version} against the pinned 3`)
    t.equal(cache.believesShared('h', v(version), 11), !stale, `a Redis entry of version ${version}`)
  }
  t.ok(cache.believesShared('h', { status: 'revoked' }, 11), 'an ended state is believed whatever its version')
  t.notOk(cache.fill('h', v(2), cache.generation, 12), 'a lookup older than the change is not stored')
  t.ok(cache.fill('h', v(3), cache.generation, 12), 'the changed state is')
  cache.changed('h', 2, 13)
  t.ok(cache.isStale('h', 2, 14), 'a late, older change never lowers the pin')
  t.ok(cache.isStale('h', 2, options.endedTtlMs), 'pinned until endedTtlMs after the change')
  t.notOk(cache.isStale('h', 2, options.endedTtlMs + 20), 'then forgotten (no Redis entry lives that long)')
  cache.changed('other', undefined, 0)
  t.notOk(cache.isStale('other', 0, 1), 'a change without a version (an older revoker) only forgets')
})

t.test('more changes than the pins hold: Redis active entries are not believed until the dropped pin would have expired', async (t) => {
  const cache = currentCache(10_000_000, { maxEnded: 2 })
  const fresh: KeyState = { ...active, version: 9 } as KeyState
  cache.changed('a', 2, 0)
  cache.changed('b', 2, 0)
  t.ok(cache.believesShared('x', fresh, 1), 'within the bound, other keys are believed')
  cache.changed('c', 2, 100)
  t.notOk(cache.isStale('a', 1, 101), 'the oldest pin was dropped')
  t.notOk(cache.believesShared('a', fresh, 101), 'so no Redis active entry is believed, of that key')
  t.notOk(cache.believesShared('x', fresh, 101), 'or of any other')
  t.ok(cache.believesShared('x', { status: 'unknown' }, 101), 'other states still are')
  t.notOk(cache.believesShared('x', fresh, options.endedTtlMs - 1), 'until the dropped pin would have expired')
  t.ok(cache.believesShared('x', fresh, options.endedTtlMs), 'then Redis is believed again')
})
