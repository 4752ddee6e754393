/** The key list's pure rules: states, the order that keeps a rolled key below its successor, and relative times. */
import t from 'tap'
import type { KeySummary } from '@scoped/agency-service/keys/key-service'
import { groupedKeys, isFinal, keyLabel, keyState, shortHint } from '@scoped/agency-service/console/key-list'
import { relativeText } from '@scoped/agency-service/console/relative-time'

function key(id: string, fields: Partial<KeySummary> = {}): KeySummary {
  return {
    id,
    name: 'web backend',
    scope: 'SUB-ACCOUNT',
    status: 'active',
    hint: `sak_live_…${id.padEnd(4, 'x').slice(0, 4)}`,
    createdAt: '2030-01-01T00:00:00.000Z',
    lastUsedAt: null,
    lastUsedIp: null,
    revokedAt: null,
    expiresAt: null,
    replacedBy: null,
    replaces: null,
    allowedCidrs: [],
    rateLimit: null,
    permissions: null,
    countsTowardLimit: true,
    ...fields,
  }
}

t.test('each key has one state; final states are hidden by default', async (t) => {
  const rows: Array<[string, Partial<KeySummary>, string, boolean]> = [
    ['active', {}, 'active', false],
    ['in its grace', { replacedBy: 'b' }, 'rolling', false],
    ['grace over', { replacedBy: 'b', status: 'expired' }, 'replaced', true],
    ['revoked while rolling', { replacedBy: 'b', status: 'revoked' }, 'revoked', true],
    ['expired', { status: 'expired' }, 'expired', true],
  ]
  for (const [name, fields, state, final] of rows) {
    t.equal(keyState(key('a', fields)), state, name)
    t.equal(isFinal(keyState(key('a', fields))), final, `${name}: final`)
  }
})

t.test('a rolled key comes right after the key that replaced it', async (t) => {
  const newest = key('n')
  const successor = key('s', { replaces: 'p' })
  const other = key('o')
  const predecessor = key('p', { replacedBy: 's', replaces: 'q' })
  const first = key('q', { replacedBy: 'p', status: 'expired' })
  t.same(
    groupedKeys([newest, successor, other, predecessor, first]).map((k) => k.id),
    ['n', 's', 'p', 'q', 'o'],
  )
  t.same(
    groupedKeys([key('x', { replacedBy: 'y' }), key('y', { replacedBy: 'x' })])
      .map((k) => k.id)
      .sort(),
    ['x', 'y'],
    'a loop loses no key',
  )
})

t.test('hints and relative times', async (t) => {
  t.equal(shortHint('sak_live_…Moy3'), '…Moy3')
  t.equal(keyLabel({ name: 'web backend', hint: 'sak_live_…Moy3' }), 'web backend (…Moy3)')
  const now = new Date('2030-01-01T12:00:00.000Z')
  const rows: Array<[string, string]> = [
    ['2030-01-02T11:00:00.000Z', 'in 23 h'],
    ['2030-01-01T11:55:00.000Z', '5 min ago'],
    ['2030-01-01T11:59:30.000Z', 'just now'],
    ['2030-01-31T12:00:00.000Z', 'in 30 d'],
  ]
  for (const [iso, text] of rows) t.equal(relativeText(iso, now), text, iso)
})
