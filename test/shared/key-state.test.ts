/**
 * KeyStateCodec, the format of everything the key-state protocol keeps in or
 * sends through Redis: cache entries (bound to their hash, with their own
 * expiry), invalidation messages and acknowledgements, each sealed with an
 * HMAC under the key-cache secret. Whatever fails the check reads as absent
 * (undefined), whoever wrote it and whatever shape it has.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto'
import t from 'tap'
import type { ActiveKeyState, KeyState } from '@scoped/shared/key-state'
import { KeyStateCodec, newInvalidationMessage, redisNames } from '@scoped/shared/key-state'

const secret = randomBytes(32)
const codec = new KeyStateCodec(secret)
const other = new KeyStateCodec(randomBytes(32))
const hash = 'a'.repeat(64)
const otherHash = 'b'.repeat(64)
const now = 1_900_000_000_000
const later = now + 60_000
const replica = 'gateway-1-abc'

const subAccountKey: ActiveKeyState = {
  status: 'active',
  tenant: { scope: 'SUB-ACCOUNT', agencyId: randomUUID(), subAccountId: randomUUID(), keyId: randomUUID() },
}
const agencyKey: ActiveKeyState = { status: 'active', tenant: { scope: 'AGENCY', agencyId: randomUUID(), subAccountId: null, keyId: randomUUID() } }
/** An active key with both of its limits: its own expiry and an allowlist. */
const limitedKey: ActiveKeyState = { ...subAccountKey, expiresAt: later + 3_600_000, allowedCidrs: ['203.0.113.0/24', '2001:db8::/32'] }
const states: Array<[string, KeyState]> = [
  ['active, sub-account scope', subAccountKey],
  ['active, agency scope', agencyKey],
  ['active, with an expiry of its own', { ...agencyKey, expiresAt: later + 1 }],
  ['active, with an allowlist', { ...agencyKey, allowedCidrs: ['198.51.100.7/32'] }],
  ['active, with both limits', limitedKey],
  ['active, with a rate limit of its own', { ...subAccountKey, rateLimit: { rate: 0.05, burst: 2 } }],
  ['active, with every limit', { ...limitedKey, rateLimit: { rate: 1_000_000, burst: 10_000_000 } }],
  ['active, with a state version', { ...subAccountKey, version: 7 }],
  ['active, with every limit and a state version', { ...limitedKey, rateLimit: { rate: 2, burst: 3 }, version: Number.MAX_SAFE_INTEGER }],
  ['revoked', { status: 'revoked' }],
  ['revoked, with its owner (a sub-account key)', { status: 'revoked', tenant: subAccountKey.tenant }],
  ['revoked, with its owner (an agency key)', { status: 'revoked', tenant: agencyKey.tenant }],
  ['deleted', { status: 'deleted' }],
  ['unknown', { status: 'unknown' }],
]

/** Text sealed as the codec seals it (`payload.mac`, the MAC over a context line and the payload): lets a row put any payload behind a valid MAC. */
function seal(context: string, payload: string, key: Buffer = secret): string {
  return `${payload}.${createHmac('sha256', key).update(context).update('\n').update(payload).digest('base64url')}`
}
const sealEntry = (payload: unknown, forHash = hash) => seal(`key-state v1 ${forHash}`, JSON.stringify(payload))
const sealMessage = (payload: unknown) => seal('invalidation v1', JSON.stringify(payload))

/** The payload of sealed text, and its MAC. */
function split(text: string): [string, string] {
  const dot = text.lastIndexOf('.')
  return [text.slice(0, dot), text.slice(dot + 1)]
}

t.test('entries: every state round-trips', async (t) => {
  for (const [name, state] of states) {
    t.same(codec.decodeEntry(hash, codec.encodeEntry(hash, state, later), now), state, name)
  }
})

t.test('the test’s seal() is the codec’s format, so the rows below can put any payload behind a valid MAC', async (t) => {
  const encoded = codec.encodeEntry(hash, { status: 'revoked' }, later)
  t.equal(sealEntry(JSON.parse(split(encoded)[0])), encoded)
})

t.test('entries: whatever fails the check reads as absent', async (t) => {
  const genuine = codec.encodeEntry(hash, subAccountKey, later)
  const [payload, mac] = split(genuine)
  const revoked = codec.encodeEntry(hash, { status: 'revoked' }, later)
  const limited = codec.encodeEntry(hash, limitedKey, later)
  const owned = codec.encodeEntry(hash, { status: 'revoked', tenant: subAccountKey.tenant }, later)
  const message = codec.encodeMessage(newInvalidationMessage([{ hash, state: 'revoked' }]))
  const tenant = subAccountKey.tenant
  const rows: Array<[string, string, number?]> = [
    // Forged: what someone with Redis access but without the secret can write.
    ['a bare JSON state, as entries were before', JSON.stringify(subAccountKey)],
    ['a payload without a MAC', payload],
    ['a payload with a made-up MAC', `${payload}.${'A'.repeat(43)}`],
    ['a payload with an empty MAC', `${payload}.`],
    ['a payload with a truncated MAC', `${payload}.${mac.slice(0, 20)}`],
    ['a payload with a MAC too long', `${payload}.${mac}AAAA`],
    ['a payload with another entry’s MAC', `${payload}.${split(revoked)[1]}`],
    ['sealed under another secret', other.encodeEntry(hash, subAccountKey, later)],
    ['sealed under another secret with my seal()', seal(`key-state v1 ${hash}`, payload, randomBytes(32))],
    // Moved: a genuine entry for another key, copied under this key's name.
    ['an entry for another hash', codec.encodeEntry(otherHash, subAccountKey, later)],
    // Kept: a genuine entry past its own expiry, whatever Redis's TTL says.
    ['expired', codec.encodeEntry(hash, subAccountKey, now - 1)],
    ['expiring exactly now', codec.encodeEntry(hash, subAccountKey, now)],
    ['expired long ago', codec.encodeEntry(hash, { status: 'revoked' }, 0)],
    ['read after its expiry', genuine, later + 1],
    // Tampered: the payload changed, the MAC kept.
    ['revoked turned active', `${split(revoked)[0].replace('"revoked"', '"active"')}.${split(revoked)[1]}`],
    ['another tenant', `${payload.replace(tenant.agencyId, randomUUID())}.${mac}`],
    ['another key id', `${payload.replace(tenant.keyId, randomUUID())}.${mac}`],
    // A revoked key's owner decides whose usage its refusals count in: never changed without the secret.
    ['a revoked key’s owner given another agency', `${split(owned)[0].replace(tenant.agencyId, randomUUID())}.${split(owned)[1]}`],
    ['a revoked key’s owner given another key id', `${split(owned)[0].replace(tenant.keyId, randomUUID())}.${split(owned)[1]}`],
    [
      'an owner added to a revoked marker',
      `${split(revoked)[0].replace('"s":"revoked"', `"s":"revoked","t":${JSON.stringify(['SUB-ACCOUNT', tenant.agencyId, tenant.subAccountId, tenant.keyId])}`)}.${split(revoked)[1]}`,
    ],
    ['a revoked key’s owner moved to another hash', codec.encodeEntry(otherHash, { status: 'revoked', tenant }, later)],
    ['a later expiry', `${payload.replace(/"e":\d+/, `"e":${later * 10}`)}.${mac}`],
    ['the key’s own expiry pushed back', `${split(limited)[0].replace(/"x":\d+/, `"x":${later * 10}`)}.${split(limited)[1]}`],
    ['the key’s own expiry removed', `${split(limited)[0].replace(/,"x":\d+/, '')}.${split(limited)[1]}`],
    ['the allowlist removed', `${split(limited)[0].replace(/,"c":\[[^\]]*\]/, '')}.${split(limited)[1]}`],
    ['the allowlist widened', `${split(limited)[0].replace('203.0.113.0/24', '0.0.0.0/0')}.${split(limited)[1]}`],
    ['a payload with a space added', `${payload} .${mac}`],
    ['the MAC in upper case', `${payload}.${mac.toUpperCase()}`],
    // Other kinds of sealed text: never taken for an entry.
    ['an invalidation message', message],
    ['an acknowledgement', codec.encodeAck(randomUUID(), replica)],
    ['an acknowledgement whose message id is the hash', codec.encodeAck(hash, replica)],
  ]
  for (const [name, text, at] of rows) t.equal(codec.decodeEntry(hash, text, at ?? now), undefined, name)
  t.same(codec.decodeEntry(hash, genuine, later - 1), subAccountKey, 'while the genuine one is read until its last millisecond')
})

t.test('entries: a valid MAC over a payload of the wrong shape is absent too', async (t) => {
  const [scope, agencyId, subAccountId, keyId] = ['SUB-ACCOUNT', randomUUID(), randomUUID(), randomUUID()]
  const rows: Array<[string, unknown]> = [
    ['null', null],
    ['a number', 1],
    ['a string', 'revoked'],
    ['an array', ['revoked', later]],
    ['an empty object', {}],
    ['no expiry', { s: 'revoked' }],
    ['an expiry as text', { s: 'revoked', e: String(later) }],
    ['an expiry of null', { s: 'revoked', e: null }],
    ['an unknown status', { s: 'valid', e: later }],
    ['a status in capitals', { s: 'REVOKED', e: later }],
    ['a status as a number', { s: 1, e: later }],
    ['active without a tenant', { s: 'active', e: later }],
    ['revoked with an owner that is not a list', { s: 'revoked', t: { scope, agencyId, subAccountId, keyId }, e: later }],
    ['revoked with an owner of null', { s: 'revoked', t: null, e: later }],
    ['revoked with an owner of an unknown scope', { s: 'revoked', t: ['ROOT', agencyId, null, keyId], e: later }],
    ['revoked with a sub-account owner without one', { s: 'revoked', t: ['SUB-ACCOUNT', agencyId, null, keyId], e: later }],
    ['revoked with an owner without a key id', { s: 'revoked', t: ['SUB-ACCOUNT', agencyId, subAccountId], e: later }],
    ['active with a tenant object', { s: 'active', t: { scope, agencyId, subAccountId, keyId }, e: later }],
    ['active with an unknown scope', { s: 'active', t: ['ROOT', agencyId, null, keyId], e: later }],
    ['active with a lower-case scope', { s: 'active', t: ['agency', agencyId, null, keyId], e: later }],
    ['an agency key with a sub-account', { s: 'active', t: ['AGENCY', agencyId, subAccountId, keyId], e: later }],
    ['a sub-account key without one', { s: 'active', t: ['SUB-ACCOUNT', agencyId, null, keyId], e: later }],
    ['a sub-account id as a number', { s: 'active', t: ['SUB-ACCOUNT', agencyId, 7, keyId], e: later }],
    ['no agency id', { s: 'active', t: ['SUB-ACCOUNT', null, subAccountId, keyId], e: later }],
    ['no key id', { s: 'active', t: ['SUB-ACCOUNT', agencyId, subAccountId], e: later }],
    ['a key id as a number', { s: 'active', t: ['SUB-ACCOUNT', agencyId, subAccountId, 1], e: later }],
    ['the key’s expiry as text', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, x: String(later) }],
    ['the key’s expiry null', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, x: null }],
    ['a state version as text', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, v: '2' }],
    ['a negative state version', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, v: -1 }],
    ['a fractional state version', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, v: 1.5 }],
    ['a state version past the safe integers', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, v: 2 ** 60 }],
    ['an allowlist that is not a list', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, c: '10.0.0.0/8' }],
    ['an empty allowlist', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, c: [] }],
    ['an allowlist with a number', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, c: [10] }],
    ['an allowlist with an empty block', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, c: [''] }],
    ['an allowlist with a block too long', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, c: ['1'.repeat(65)] }],
    ['an allowlist too long', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, c: Array.from({ length: 65 }, (_, i) => `10.0.${i}.0/24`) }],
    ['a rate limit that is not a pair', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: { rate: 1, burst: 2 } }],
    ['a rate limit of one number', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: [1] }],
    ['a rate limit of three numbers', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: [1, 2, 3] }],
    ['a rate limit null', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: null }],
    ['a rate of 0', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: [0, 2] }],
    ['a rate above the bound', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: [1_000_001, 2] }],
    ['a rate as text', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: ['5', 2] }],
    ['a burst of 0', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: [5, 0] }],
    ['a burst that is not whole', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: [5, 2.5] }],
    ['a burst above the bound', { s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later, r: [5, 10_000_001] }],
  ]
  for (const [name, payload] of rows) t.equal(codec.decodeEntry(hash, sealEntry(payload), now), undefined, name)
  const text = (value: string) => seal(`key-state v1 ${hash}`, value)
  const texts: Array<[string, string]> = [
    ['not JSON', 'revoked'],
    ['truncated JSON', '{"s":"revoked","e":'],
    ['empty', ''],
  ]
  for (const [name, payload] of texts) t.equal(codec.decodeEntry(hash, text(payload), now), undefined, name)
  t.same(
    codec.decodeEntry(hash, sealEntry({ s: 'active', t: [scope, agencyId, subAccountId, keyId], e: later }), now),
    { status: 'active', tenant: { scope, agencyId, subAccountId, keyId } },
    '(control) the right shape is read',
  )
})

t.test('entries: one written before keys had rate limits (no `r`) is read as a key without one', async (t) => {
  // The format of every entry written before migration 007, byte for byte: s, t, e and the older limits only.
  const tenant = subAccountKey.tenant
  const before = sealEntry({ s: 'active', t: [tenant.scope, tenant.agencyId, tenant.subAccountId, tenant.keyId], e: later, x: later + 1, c: ['10.0.0.0/8'] })
  const read = codec.decodeEntry(hash, before, now)
  t.same(read, { ...subAccountKey, expiresAt: later + 1, allowedCidrs: ['10.0.0.0/8'] })
  t.notOk(read !== undefined && 'rateLimit' in read, 'no rate limit: the route defaults apply')
  const [payload] = split(codec.encodeEntry(hash, subAccountKey, later))
  t.notOk('r' in JSON.parse(payload), 'and a key without one is still written without `r`, as before')
  const [limited] = split(codec.encodeEntry(hash, { ...subAccountKey, rateLimit: { rate: 2.5, burst: 7 } }, later))
  t.same(JSON.parse(limited).r, [2.5, 7], 'a key with one: `r` as [rate, burst]')
})

t.test('malformed text of many shapes is absent, never an error', async (t) => {
  const texts = [
    '',
    '.',
    '..',
    'x',
    'x.',
    '.x',
    'revoked',
    'null',
    '{}',
    '[]',
    '{"s":"revoked","e":99999999999999}',
    'a.b.c',
    '\u0000',
    '\u00e9t\u00e9.\u00e9t\u00e9',
    ' '.repeat(10),
    'x'.repeat(100_000),
    `${'.'.repeat(1000)}x`,
    '%00',
    '\n.\n',
  ]
  for (const text of texts) {
    const shown = JSON.stringify(text.slice(0, 40))
    t.equal(codec.decodeEntry(hash, text, now), undefined, `entry ${shown}`)
    t.equal(codec.decodeMessage(text), undefined, `message ${shown}`)
    t.equal(codec.decodeAck(randomUUID(), text), undefined, `ack ${shown}`)
  }
})

t.test('messages: round trip, and whatever fails the check is absent', async (t) => {
  const message = newInvalidationMessage([
    { hash, state: 'revoked' },
    { hash: otherHash, state: 'deleted' },
    { hash: 'c'.repeat(64), state: 'changed' },
    { hash: 'd'.repeat(64), state: 'changed', version: 3 },
    { hash: 'e'.repeat(64), state: 'created' },
  ])
  t.same(codec.decodeMessage(codec.encodeMessage(message)), message, 'round trip, a change with the version it made')
  const empty = newInvalidationMessage([])
  t.same(codec.decodeMessage(codec.encodeMessage(empty)), empty, 'an empty list round-trips')
  t.not(newInvalidationMessage([]).id, newInvalidationMessage([]).id, 'every message has its own id')

  const genuine = codec.encodeMessage(message)
  const [payload, mac] = split(genuine)
  const rows: Array<[string, string]> = [
    ['bare JSON', payload],
    ['a made-up MAC', `${payload}.${'A'.repeat(43)}`],
    ['sealed under another secret', other.encodeMessage(message)],
    ['a key added, the MAC kept', `${payload.replace(']]', `],["${'d'.repeat(64)}","revoked"]]`)}.${mac}`],
    ['a key removed, the MAC kept', `${JSON.stringify({ id: message.id, k: [[hash, 'revoked']] })}.${mac}`],
    ['an entry', codec.encodeEntry(hash, { status: 'revoked' }, later)],
    ['an acknowledgement of it', codec.encodeAck(message.id, replica)],
    // Valid MAC, wrong shape.
    ['no id', sealMessage({ k: [[hash, 'revoked']] })],
    ['an id as a number', sealMessage({ id: 1, k: [[hash, 'revoked']] })],
    ['no keys', sealMessage({ id: 'x' })],
    ['keys as an object', sealMessage({ id: 'x', k: { [hash]: 'revoked' } })],
    ['a key as a string', sealMessage({ id: 'x', k: [hash] })],
    ['a short hash', sealMessage({ id: 'x', k: [['abc', 'revoked']] })],
    ['an upper-case hash', sealMessage({ id: 'x', k: [['A'.repeat(64), 'revoked']] })],
    ['a hash as a number', sealMessage({ id: 'x', k: [[1, 'revoked']] })],
    ['the state "active"', sealMessage({ id: 'x', k: [[hash, 'active']] })],
    ['the state "unknown"', sealMessage({ id: 'x', k: [[hash, 'unknown']] })],
    ['no state', sealMessage({ id: 'x', k: [[hash]] })],
    ['a version as text', sealMessage({ id: 'x', k: [[hash, 'changed', '3']] })],
    ['a negative version', sealMessage({ id: 'x', k: [[hash, 'changed', -3]] })],
    ['a version and more', sealMessage({ id: 'x', k: [[hash, 'changed', 3, 4]] })],
    [
      'one bad key among good ones',
      sealMessage({
        id: 'x',
        k: [
          [hash, 'revoked'],
          ['nope', 'deleted'],
        ],
      }),
    ],
    ['an array', sealMessage([['x', hash]])],
    ['null', sealMessage(null)],
    ['not JSON', seal('invalidation v1', 'revoke everything')],
  ]
  for (const [name, text] of rows) t.equal(codec.decodeMessage(text), undefined, name)
})

t.test('acknowledgements: bound to their message and to the secret', async (t) => {
  const id = randomUUID()
  const ack = codec.encodeAck(id, replica)
  t.equal(codec.decodeAck(id, ack), replica, 'names the replica that sent it')
  const rows: Array<[string, string, string]> = [
    ['for another message', randomUUID(), ack],
    ['sealed under another secret', id, other.encodeAck(id, replica)],
    ['the replica id alone', id, replica],
    ['another replica id under this MAC', id, `gateway-2-abc.${split(ack)[1]}`],
    ['a made-up MAC', id, `${replica}.${'A'.repeat(43)}`],
    ['the message', id, codec.encodeMessage({ id, keys: [{ hash, state: 'revoked' }] })],
    ['an entry', id, codec.encodeEntry(hash, { status: 'revoked' }, later)],
    ['an entry sealed for a hash equal to the message id', id, codec.encodeEntry(id, { status: 'revoked' }, later)],
  ]
  for (const [name, messageId, text] of rows) t.equal(codec.decodeAck(messageId, text), undefined, name)
})

t.test('the secret must be at least 32 bytes', async (t) => {
  t.throws(() => new KeyStateCodec(randomBytes(31)), /at least 32 bytes/)
  t.throws(() => new KeyStateCodec(Buffer.alloc(0)), /at least 32 bytes/)
  t.doesNotThrow(() => new KeyStateCodec(randomBytes(64)))
})

t.test('Redis names: everything under the prefix, one entry per hash, one acknowledgement list per message', async (t) => {
  const names = redisNames('sak:')
  t.equal(names.cacheEntry(hash), `sak:key:${hash}`)
  t.equal(names.channel, 'sak:key-invalidation')
  t.equal(names.acknowledgements('m1'), 'sak:key-invalidation-ack:m1')
  t.not(redisNames('other:').channel, names.channel, 'another prefix, another channel')
})
