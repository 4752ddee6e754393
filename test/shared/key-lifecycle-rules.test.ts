/**
 * The pure rules of the key lifecycle past create, revoke and delete, table
 * by table: durations on the command line, CIDR blocks and allowlists, ISO
 * times, a key's status and whether it counts toward the limit, and the
 * limits an active key's cached state carries (sealed for Redis, read back).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import t from 'tap'
import { describeSeconds, parseDuration, requireDuration } from '@scoped/shared/durations'
import { canonicalCidrs, cidrMatcher, MAX_ALLOWED_CIDRS, normalizeAddress, parseCidr, requireCidrList } from '@scoped/shared/ip-address'
import type { KeyState } from '@scoped/shared/key-state'
import { KeyStateCodec } from '@scoped/shared/key-state'
import { requireIsoTime } from '@scoped/shared/validation'
import { countsTowardLimit, keyStatus, MAX_GRACE_SECONDS } from '@scoped/agency-service/keys/key-status'
import { requireGraceSeconds } from '@scoped/agency-service/keys/key-service'
import { toActor, actorText } from '@scoped/agency-service/audit/actor'
import { cidrsFromForm, expiryFromForm } from '@scoped/agency-service/console/key-forms'

t.test('durations: an integer and a unit (s, m, h, d), nothing else', async (t) => {
  const valid: Array<[string, number]> = [
    ['0s', 0],
    ['5s', 5],
    ['90s', 90],
    ['15m', 900],
    ['1h', 3600],
    ['24h', 86_400],
    ['7d', 604_800],
    ['90d', 7_776_000],
    ['30d', MAX_GRACE_SECONDS],
  ]
  for (const [text, seconds] of valid) t.equal(parseDuration(text), seconds, text)
  const invalid = [
    '',
    's',
    '5',
    '5 s',
    ' 5s',
    '5s ',
    '5S',
    '5sec',
    '1.5h',
    '-5s',
    '+5s',
    '05s',
    '5w',
    '5y',
    '1h30m',
    '5ms',
    'PT5S',
    '0x10s',
    '1e3s',
    '５s',
    '12345678901s',
  ]
  for (const text of invalid) t.equal(parseDuration(text), undefined, JSON.stringify(text))

  t.equal(requireDuration('24h', '--grace', 0, MAX_GRACE_SECONDS), 86_400)
  t.throws(() => requireDuration('31d', '--grace', 0, MAX_GRACE_SECONDS), { statusCode: 400, message: '--grace must be from 0s to 30d' })
  t.throws(() => requireDuration('0s', '--expires-in', 1, 100), { message: '--expires-in must be from 1s to 100s' })
  t.throws(() => requireDuration('soon', '--expires-in', 1, 100), { statusCode: 400, message: /--expires-in must be an integer and a unit \(s, m, h or d\)/ })
  t.throws(() => requireDuration(undefined, '--grace', 0, 1), { name: 'ApiError', statusCode: 400 })
  for (const [seconds, text] of [
    [0, '0s'],
    [59, '59s'],
    [60, '1m'],
    [5400, '90m'],
    [7200, '2h'],
    [86_400, '1d'],
    [MAX_GRACE_SECONDS, '30d'],
  ] as const) {
    t.equal(describeSeconds(seconds), text, `${seconds} s`)
  }
})

t.test('CIDR blocks: one spelling each; host bits, bad prefixes and non-addresses refused', async (t) => {
  const valid: Array<[string, string]> = [
    ['10.0.0.0/8', '10.0.0.0/8'],
    ['10.1.2.3', '10.1.2.3/32'],
    ['10.1.2.3/32', '10.1.2.3/32'],
    [' 192.168.0.0/16 ', '192.168.0.0/16'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['2001:db8::/32', '2001:db8::/32'],
    ['2001:DB8:0:0::/48', '2001:db8::/48'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1/128'],
    ['::1', '::1/128'],
    ['::/0', '::/0'],
    ['::ffff:10.0.0.0/104', '10.0.0.0/8'],
    ['::ffff:203.0.113.7', '203.0.113.7/32'],
    ['fe80::/10', 'fe80::/10'],
  ]
  for (const [input, text] of valid) t.match(parseCidr(input), { text }, input)
  const invalid: Array<[string, RegExp]> = [
    ['', /is not an IP address/],
    ['abc', /is not an IP address/],
    ['10.0.0', /is not an IP address/],
    ['010.0.0.0/8', /is not an IP address/],
    ['256.0.0.0/8', /is not an IP address/],
    ['fe80::1%eth0', /is not an IP address/],
    ['10.0.0.0/33', /bad prefix length: it must be 0 to 32/],
    ['10.0.0.0/08', /bad prefix length/],
    ['10.0.0.0/', /bad prefix length/],
    ['10.0.0.0/-1', /bad prefix length/],
    ['2001:db8::/129', /bad prefix length: it must be 0 to 128/],
    ['::ffff:10.0.0.0/95', /bad prefix length: it must be 0 to 128/],
    ['10.1.2.3/8', /has bits set after its prefix length; the block is 10\.0\.0\.0\/8/],
    ['2001:db8::1/32', /the block is 2001:db8::\/32/],
  ]
  for (const [input, message] of invalid) {
    const parsed = parseCidr(input)
    t.ok('error' in parsed && message.test(parsed.error), `${JSON.stringify(input)}: ${JSON.stringify(parsed)}`)
  }
  t.same(canonicalCidrs(['::1.2.3.4/128', '10.0.0.0/8']), ['::102:304/128', '10.0.0.0/8'], 'what Postgres writes with a dotted tail, read in our spelling')
  t.equal(normalizeAddress('::ffff:7f00:1'), '127.0.0.1')
})

t.test('allowlists: a list of at most 32 blocks, deduplicated; the entry at fault named', async (t) => {
  t.same(requireCidrList([], 'allowedCidrs'), [], 'empty: any address')
  t.same(requireCidrList(['10.0.0.0/8', '10.0.0.0/8', '2001:db8::/32', '10.1.2.3'], 'allowedCidrs'), ['10.0.0.0/8', '2001:db8::/32', '10.1.2.3/32'])
  t.throws(() => requireCidrList('10.0.0.0/8', 'body.allowedCidrs'), { statusCode: 400, message: 'body.allowedCidrs must be a list of CIDR blocks' })
  t.throws(() => requireCidrList([10], 'body.allowedCidrs'), { message: 'body.allowedCidrs[0] must be a string' })
  t.throws(() => requireCidrList(['10.0.0.0/8', 'nope'], '--allow-cidr'), { message: '--allow-cidr[1] "nope" is not an IP address or CIDR block' })
  const many = Array.from({ length: MAX_ALLOWED_CIDRS + 1 }, (_, i) => `10.0.${i}.0/24`)
  t.throws(() => requireCidrList(many, 'allowedCidrs'), { message: `allowedCidrs may hold at most ${MAX_ALLOWED_CIDRS} CIDR blocks` })
  t.equal(requireCidrList(many.slice(1), 'allowedCidrs').length, MAX_ALLOWED_CIDRS)
})

t.test('the allowlist matcher: IPv4 and IPv6, built once; a damaged list allows less, never more', async (t) => {
  const matches = cidrMatcher(['10.0.0.0/8', '203.0.113.7/32', '2001:db8::/32'])
  const rows: Array<[string, boolean]> = [
    ['10.0.0.1', true],
    ['10.255.255.255', true],
    ['11.0.0.1', false],
    ['203.0.113.7', true],
    ['203.0.113.8', false],
    ['2001:db8::1', true],
    ['2001:db8:ffff::1', true],
    ['2001:db9::1', false],
    ['::1', false],
    ['0.0.0.0', false],
    ['not an address', false],
  ]
  for (const [address, expected] of rows) t.equal(matches(address), expected, address)
  t.equal(cidrMatcher(['nonsense', 'also nonsense'])('10.0.0.1'), false, 'a list whose entries all fail allows nothing')
  t.equal(cidrMatcher(['nonsense', '10.0.0.0/8'])('10.0.0.1'), true)
  t.equal(cidrMatcher(['::/0'])('10.0.0.1'), false, 'every IPv6 address is not every address: IPv4 clients are IPv4')
  t.equal(cidrMatcher(['0.0.0.0/0', '::/0'])('2001:db8::1'), true)
})

t.test('ISO times: a date, a time and an offset, on a real calendar', async (t) => {
  const valid: Array<[string, string]> = [
    ['2030-01-31T12:00:00Z', '2030-01-31T12:00:00.000Z'],
    ['2030-01-31T12:00Z', '2030-01-31T12:00:00.000Z'],
    ['2030-01-31T14:00:00+02:00', '2030-01-31T12:00:00.000Z'],
    ['2030-01-31T12:00:00.123Z', '2030-01-31T12:00:00.123Z'],
    ['2028-02-29T00:00:00Z', '2028-02-29T00:00:00.000Z'],
  ]
  for (const [text, iso] of valid) t.equal(requireIsoTime(text, 'expiresAt').toISOString(), iso, text)
  for (const text of [
    '2030-01-31',
    '2030-01-31T12:00:00',
    '2030-02-30T00:00:00Z',
    '2029-02-29T00:00:00Z',
    '2030-13-01T00:00:00Z',
    '2030-01-31T24:00:00Z',
    'tomorrow',
    '1893456000',
    '',
    ' 2030-01-31T12:00:00Z',
  ]) {
    t.throws(
      () => requireIsoTime(text, 'body.expiresAt'),
      { statusCode: 400, message: /^body\.expiresAt must be an ISO 8601 date and time with an offset/ },
      JSON.stringify(text),
    )
  }
  t.throws(() => requireIsoTime(1893456000, 'expiresAt'), { name: 'ApiError', statusCode: 400 })
})

t.test('status and the limit: revoked, expired from its instant, a rolled key in its grace period active but not counted', async (t) => {
  const now = Date.parse('2030-06-01T12:00:00Z')
  const at = (ms: number) => new Date(now + ms)
  const rows: Array<[string, { revokedAt: Date | null; expiresAt: Date | null; replacedBy: string | null }, string, boolean]> = [
    ['plain', { revokedAt: null, expiresAt: null, replacedBy: null }, 'active', true],
    ['expires later', { revokedAt: null, expiresAt: at(1), replacedBy: null }, 'active', true],
    ['expires at this very millisecond', { revokedAt: null, expiresAt: at(0), replacedBy: null }, 'expired', false],
    ['expired', { revokedAt: null, expiresAt: at(-1), replacedBy: null }, 'expired', false],
    ['revoked', { revokedAt: at(-5), expiresAt: null, replacedBy: null }, 'revoked', false],
    ['revoked and past its expiry', { revokedAt: at(-5), expiresAt: at(-1), replacedBy: null }, 'revoked', false],
    ['rolled, in its grace period', { revokedAt: null, expiresAt: at(3_600_000), replacedBy: randomUUID() }, 'active', false],
    ['rolled, grace over', { revokedAt: null, expiresAt: at(-1), replacedBy: randomUUID() }, 'expired', false],
    ['rolled, then revoked', { revokedAt: at(-1), expiresAt: at(3_600_000), replacedBy: randomUUID() }, 'revoked', false],
  ]
  for (const [name, key, status, counted] of rows) {
    t.equal(keyStatus(key, now), status, `${name}: ${status}`)
    t.equal(countsTowardLimit(key, now), counted, `${name}: ${counted ? 'counts' : 'does not count'}`)
  }
})

t.test('grace periods of the API: whole seconds, 0 to 30 days', async (t) => {
  t.equal(requireGraceSeconds(undefined), 0, 'omitted: at once')
  for (const value of [0, 1, 3600, MAX_GRACE_SECONDS]) t.equal(requireGraceSeconds(value), value)
  for (const value of [-1, 1.5, MAX_GRACE_SECONDS + 1, '60', Number.NaN, Infinity]) {
    t.throws(() => requireGraceSeconds(value), { statusCode: 400, message: /graceSeconds must be a whole number of seconds from 0 to 2592000/ }, String(value))
  }
})

t.test('actors: a console user, an operator, an API key', async (t) => {
  const user = randomUUID()
  t.same(toActor(`user:${user}`), { kind: 'user', id: user, clientAddress: null })
  t.same(toActor('api-key:k1'), { kind: 'key', id: 'k1', clientAddress: null })
  t.same(toActor('ctl:alice'), { kind: 'cli', id: 'ctl:alice', clientAddress: null })
  t.same(toActor('test'), { kind: 'cli', id: 'test', clientAddress: null })
  for (const text of [`user:${user}`, 'api-key:k1', 'ctl:alice']) t.equal(actorText(toActor(text)), text, `${text} round-trips`)
})

t.test('the console form: allowlist text and expiry presets', async (t) => {
  t.same(cidrsFromForm('10.0.0.0/8\n 2001:db8::/32 ,203.0.113.7\r\n\n'), ['10.0.0.0/8', '2001:db8::/32', '203.0.113.7/32'])
  t.same(cidrsFromForm(''), [])
  t.throws(() => cidrsFromForm('10.0.0.0/8\nhello'), { errors: [{ field: 'key-cidrs', message: 'Line 2: "hello" is not an IP address or CIDR block' }] })
  t.throws(
    () => cidrsFromForm('nope\n10.0.0.0/8\n10.1.2.3/8 also'),
    {
      errors: [
        { field: 'key-cidrs', message: 'Line 1: "nope" is not an IP address or CIDR block' },
        { field: 'key-cidrs', message: 'Line 3: "10.1.2.3/8" has bits set after its prefix length; the block is 10.0.0.0/8' },
        { field: 'key-cidrs', message: 'Line 3: "also" is not an IP address or CIDR block' },
      ],
    },
    'every bad entry, each naming its line',
  )
  const now = Date.parse('2030-06-01T12:00:00Z')
  t.equal(expiryFromForm('never', '', now), null)
  t.equal(expiryFromForm(undefined, undefined, now), null)
  t.equal(expiryFromForm('90d', '', now)?.toISOString(), '2030-08-30T12:00:00.000Z')
  t.equal(expiryFromForm('date', '2031-01-02T03:04', now)?.toISOString(), '2031-01-02T03:04:00.000Z', 'a datetime-local value, read as UTC')
  for (const [preset, date, field] of [
    ['date', '', 'key-expires-on'],
    ['date', '2031-02-30T00:00', 'key-expires-on'],
    ['date', 'tomorrow', 'key-expires-on'],
    ['fortnight', '', 'key-expires'],
    // A date typed while Expires says otherwise is refused on the date field, never ignored.
    ['never', '2031-01-02T03:04', 'key-expires-on'],
    ['30d', '2031-01-02T03:04', 'key-expires-on'],
  ] as const) {
    t.throws(() => expiryFromForm(preset, date, now), { errors: [{ field, message: /./ }] }, `${preset} ${date}`)
  }
})

t.test('cached state: an active key carries its expiry and allowlist through Redis, sealed; without them it reads as before', async (t) => {
  const codec = new KeyStateCodec(randomBytes(32))
  const hash = 'c'.repeat(64)
  const later = Date.now() + 60_000
  const tenant = { scope: 'SUB-ACCOUNT' as const, agencyId: randomUUID(), subAccountId: randomUUID(), keyId: randomUUID() }
  const states: Array<[string, KeyState]> = [
    ['no limits', { status: 'active', tenant }],
    ['an expiry', { status: 'active', tenant, expiresAt: 1_900_000_000_123 }],
    ['an allowlist', { status: 'active', tenant, allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'] }],
    ['both', { status: 'active', tenant, expiresAt: 1_900_000_000_000, allowedCidrs: ['203.0.113.7/32'] }],
  ]
  for (const [name, state] of states) t.same(codec.decodeEntry(hash, codec.encodeEntry(hash, state, later), Date.now()), state, name)
  t.same(
    codec.decodeEntry(hash, codec.encodeEntry(hash, { status: 'active', tenant, expiresAt: null, allowedCidrs: [] }, later), Date.now()),
    { status: 'active', tenant },
    'null and empty are no limits',
  )

  const sealed = codec.encodeEntry(hash, { status: 'active', tenant, expiresAt: 1_900_000_000_000, allowedCidrs: ['10.0.0.0/8'] }, later)
  const [payload, mac] = [sealed.slice(0, sealed.lastIndexOf('.')), sealed.slice(sealed.lastIndexOf('.') + 1)]
  for (const [name, tampered] of [
    ['the expiry moved', payload.replace('1900000000000', '1900000009999')],
    ['the expiry dropped', payload.replace(/,"x":\d+/, '')],
    ['the allowlist widened', payload.replace('10.0.0.0/8', '0.0.0.0/0')],
    ['the allowlist dropped', payload.replace(/,"c":\[[^\]]*\]/, '')],
  ]) {
    t.not(tampered, payload, `${name}: the payload did change`)
    t.equal(codec.decodeEntry(hash, `${tampered}.${mac}`, Date.now()), undefined, `${name}, the MAC kept: absent`)
  }
})
