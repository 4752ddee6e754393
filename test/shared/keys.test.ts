import t from 'tap'
import { generateKey, hashKey, hasKeyShape, hasValidChecksum, KEY_LENGTH, KEY_PREFIX, keyHint, parseKey } from '@scoped/shared/keys'

const valid = generateKey()

/** The key with its first two different neighbouring secret characters swapped (two equal ones would change nothing). */
function swapDistinctNeighbours(key: string): string {
  let i = KEY_PREFIX.length
  while (key[i] === key[i + 1]) i++
  return key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2)
}
const body = valid.slice(0, -6)
const sum = valid.slice(-6)
const flip = (c: string): string => (c === 'A' ? 'B' : 'A')

t.test('a generated key has the documented shape', async (t) => {
  t.match(valid, /^sak_live_[0-9A-Za-z]{49}$/)
  t.equal(valid.length, KEY_LENGTH)
  t.ok(valid.startsWith(KEY_PREFIX))
  t.ok(KEY_PREFIX.endsWith('_live_'))
  t.same(parseKey(valid), { ok: true, key: valid })
})

t.test('generated keys do not repeat and use the whole alphabet', async (t) => {
  const keys = new Set(Array.from({ length: 2000 }, () => generateKey()))
  t.equal(keys.size, 2000)
  const seen = new Set([...keys].flatMap((key) => [...key.slice(KEY_PREFIX.length, -6)]))
  t.equal(seen.size, 62, 'all 62 base62 characters appear in the secrets')
})

const malformed: Array<[string, string]> = [
  ['empty', ''],
  ['whitespace only', '   '],
  ['leading whitespace', ` ${valid}`],
  ['trailing whitespace', `${valid} `],
  ['trailing newline', `${valid}\n`],
  ['wrong prefix', `sk_live_${valid.slice(KEY_PREFIX.length)}x`],
  ['another product prefix', `abc_live_${valid.slice(KEY_PREFIX.length)}`],
  ['test key', `sak_test_${valid.slice(KEY_PREFIX.length)}`],
  ['upper-case prefix', valid.replace('sak_live_', 'SAK_LIVE_')],
  ['truncated by one', valid.slice(0, -1)],
  ['only the prefix', KEY_PREFIX],
  ['extra character', `${valid}A`],
  ['bad checksum', body + flip(sum[0]!) + sum.slice(1)],
  ['one secret character changed', KEY_PREFIX + flip(valid[KEY_PREFIX.length]!) + valid.slice(KEY_PREFIX.length + 1)],
  ['two characters swapped', swapDistinctNeighbours(valid)],
  ['bad charset: dash', `${body.slice(0, -1)}-${sum}`],
  ['bad charset: underscore in secret', `${body.slice(0, -1)}_${sum}`],
  ['bad charset: non-ASCII', `${body.slice(0, -1)}é${sum}`],
  ['NUL byte', `${body.slice(0, -1)}\u0000${sum}`],
  ['very long', valid.repeat(200)],
  ['bearer scheme included', `Bearer ${valid}`],
  ['hash instead of key', hashKey(valid)],
]

/** The rows whose shape is a key's and only the checksum is wrong (the gate checks these two steps apart). */
const checksumOnly = new Set(['bad checksum', 'one secret character changed', 'two characters swapped'])

for (const [name, presented] of malformed) {
  t.test(`refuses a malformed key: ${name}`, async (t) => {
    t.same(parseKey(presented), { ok: false })
    t.equal(hasKeyShape(presented), checksumOnly.has(name), checksumOnly.has(name) ? 'the shape of a key' : 'not the shape of a key')
    if (hasKeyShape(presented)) t.notOk(hasValidChecksum(presented), 'the checksum does not match')
  })
}

t.test('a generated key has the shape and its checksum', async (t) => {
  for (let i = 0; i < 50; i++) {
    const key = generateKey()
    t.ok(hasKeyShape(key) && hasValidChecksum(key))
  }
})

t.test('hashing is SHA-256 hex, deterministic, and differs per key', async (t) => {
  t.match(hashKey(valid), /^[0-9a-f]{64}$/)
  t.equal(hashKey(valid), hashKey(valid))
  t.not(hashKey(valid), hashKey(generateKey()))
})

t.test('the hint shows only the prefix and checksum characters', async (t) => {
  const hint = keyHint(valid)
  t.equal(hint, `${KEY_PREFIX}…${valid.slice(-4)}`)
  t.notOk(hint.includes(valid.slice(KEY_PREFIX.length, KEY_PREFIX.length + 4)), 'no part of the secret')
})
