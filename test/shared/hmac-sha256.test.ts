/**
 * The gateway's HMAC-SHA256 from two one-shot hashes must be exactly Node's
 * createHmac for every key and message: random keys of every length around
 * the 64-byte block (longer ones are hashed first), given as bytes, text or a
 * KeyObject; messages empty, ASCII, multi-byte UTF-8, and longer than the
 * object's first scratch buffer; and one object signing many messages in a
 * row, since it reuses its buffers.
 */
import t from 'tap'
import { createHmac, createSecretKey, randomBytes } from 'node:crypto'
import { HmacSha256 } from '@scoped/shared/hmac-sha256'

function randomMessage(length: number): string {
  const alphabet = 'abcXYZ019 \n:/=+-_éü€😀'
  let text = ''
  for (let i = 0; i < length; i++) text += alphabet[Math.floor(Math.random() * alphabet.length)]!
  return text
}

t.test('equals createHmac for keys of every length around the block and messages of every kind', async (t) => {
  let compared = 0
  for (const keyLength of [0, 1, 16, 32, 63, 64, 65, 100, 200]) {
    const key = randomBytes(keyLength)
    const hmac = new HmacSha256(key)
    for (const message of ['', 'v2\nGET\n/v1/agents\n', randomMessage(50), randomMessage(1_000), randomMessage(5_000), 'a'.repeat(4_096)]) {
      const expected = createHmac('sha256', key).update(message).digest()
      if (hmac.hex(message) !== expected.toString('hex') || !Buffer.from(hmac.hex(message), 'hex').equals(expected)) {
        t.fail(`key of ${keyLength} bytes, message of ${message.length} characters`)
      }
      compared++
    }
  }
  t.equal(compared, 54, 'every pair compared')
})

t.test('a key given as text or as a KeyObject is the same key as its bytes', async (t) => {
  const text = 'm'.repeat(40) + 'é'
  t.equal(new HmacSha256(text).hex('message'), createHmac('sha256', text).update('message').digest('hex'))
  const bytes = randomBytes(32)
  t.equal(new HmacSha256(createSecretKey(bytes)).hex('message'), createHmac('sha256', bytes).update('message').digest('hex'))
})

t.test('one object, many messages in a row, long after short: nothing of one message stays in the next', async (t) => {
  const key = randomBytes(32)
  const hmac = new HmacSha256(key)
  const messages = Array.from({ length: 200 }, (_, i) => randomMessage((i * 37) % 2_500))
  const mismatches = messages.filter((message) => hmac.hex(message) !== createHmac('sha256', key).update(message).digest('hex'))
  t.same(mismatches, [])
})
