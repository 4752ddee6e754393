/**
 * The client address behind trusted proxies: GATEWAY_TRUSTED_PROXIES parsing,
 * and X-Forwarded-For read from the right, believed only from trusted peers,
 * never answering anything but one valid, normalized IP address.
 */
import t from 'tap'
import { ConfigError } from '@scoped/shared/config'
import { clientAddress, MAX_ENTRIES, normalizeAddress, parseTrustedProxies, UNKNOWN_ADDRESS } from '@scoped/gateway/client-address'

const show = (raw: unknown): string =>
  String(JSON.stringify(raw))
    .slice(0, 120)
    .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)

t.test('parseTrustedProxies: accepted values', async (t) => {
  const rows: Array<[string | undefined, string[], string[]]> = [
    // value, trusted, not trusted
    [undefined, [], ['10.0.0.1', '127.0.0.1', '::1']],
    ['', [], ['10.0.0.1']],
    ['   ', [], ['10.0.0.1']],
    [
      '10.0.0.0/8, 192.168.1.7, fd00::/8',
      ['10.0.0.1', '10.255.255.255', '192.168.1.7', 'fd00::1', 'fdff:ffff::1'],
      ['11.0.0.1', '192.168.1.8', 'fe00::1', '::1'],
    ],
    ['127.0.0.1', ['127.0.0.1'], ['127.0.0.2']],
    ['::1', ['::1'], ['127.0.0.1', '::2']],
    ['2001:DB8::/32', ['2001:db8::1', '2001:db8:ffff::9'], ['2001:db9::1']],
    ['10.1.2.3/8', ['10.9.9.9'], ['11.0.0.0']], // host bits set: the network is meant
    ['::ffff:10.0.0.0/104', ['10.0.0.1'], ['11.0.0.1']], // an IPv4-mapped network is an IPv4 one
    ['::ffff:192.0.2.1', ['192.0.2.1'], ['192.0.2.2']],
    ['0.0.0.0/0', ['1.2.3.4', '255.255.255.255'], ['::1']],
    ['\t10.0.0.1 ,10.0.0.2\t', ['10.0.0.1', '10.0.0.2'], ['10.0.0.3']],
  ]
  for (const [value, trusted, untrusted] of rows) {
    const proxies = parseTrustedProxies(value)
    for (const address of trusted) t.ok(proxies.has(address), `${show(value)} trusts ${address}`)
    for (const address of untrusted) t.notOk(proxies.has(address), `${show(value)} does not trust ${address}`)
  }
  t.same(parseTrustedProxies('10.0.0.0/8, ::1').rules.length, 2, 'rules are listed for the start-up log')
})

t.test('parseTrustedProxies: a bad entry stops the start, naming the variable and the entry', async (t) => {
  const rows: Array<[string, string]> = [
    ['10.0.0.0/33', '"10.0.0.0/33"'],
    ['fd00::/129', '"fd00::/129"'],
    ['10.0.0.0/', '"10.0.0.0/"'],
    ['10.0.0.0/8/8', '"10.0.0.0/8/8"'],
    ['10.0.0.0/-1', '"10.0.0.0/-1"'],
    ['10.0.0.0/08', '"10.0.0.0/08"'],
    ['10.0.0.0/ 8', '"10.0.0.0/ 8"'],
    ['::ffff:10.0.0.0/64', '"::ffff:10.0.0.0/64"'],
    ['10.0.0.256', '"10.0.0.256"'],
    ['010.0.0.1', '"010.0.0.1"'],
    ['10.0.0', '"10.0.0"'],
    ['localhost', '"localhost"'],
    ['10.0.0.1 10.0.0.2', '"10.0.0.1 10.0.0.2"'],
    ['10.0.0.1;10.0.0.2', '"10.0.0.1;10.0.0.2"'],
    ['fe80::1%eth0', '"fe80::1%eth0"'],
    ['[::1]', '"[::1]"'],
    ['10.0.0.1:80', '"10.0.0.1:80"'],
    ['10.0.0.1, nope', '"nope"'],
    ['10.0.0.1,,10.0.0.2', 'empty entry'],
    ['10.0.0.1,', 'empty entry'],
  ]
  for (const [value, named] of rows) {
    try {
      parseTrustedProxies(value)
      t.fail(`${show(value)} was accepted`)
    } catch (error) {
      t.ok(error instanceof ConfigError, `${show(value)}: a ConfigError`)
      t.equal((error as ConfigError).variable, 'GATEWAY_TRUSTED_PROXIES')
      t.match((error as Error).message, named, `${show(value)}: names ${named}`)
    }
  }
})

t.test('normalizeAddress', async (t) => {
  const rows: Array<[string, string | undefined]> = [
    ['1.2.3.4', '1.2.3.4'],
    ['::ffff:1.2.3.4', '1.2.3.4'],
    ['::FFFF:1.2.3.4', '1.2.3.4'],
    ['::ffff:7b7b:7b7b', '123.123.123.123'],
    ['0:0:0:0:0:ffff:0102:0304', '1.2.3.4'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:db8::0:1', '2001:db8::1'],
    ['::1', '::1'],
    ['::', '::'],
    ['::1.2.3.4', '::102:304'], // IPv4-compatible (deprecated) is not IPv4-mapped
    ['fe80::1%eth0', undefined],
    ['01.2.3.4', undefined],
    ['1.2.3.4 ', undefined],
    ['[::1]', undefined],
    ['', undefined],
    ['garbage', undefined],
  ]
  for (const [raw, expected] of rows) t.equal(normalizeAddress(raw), expected, show(raw))
})

t.test('clientAddress', async (t) => {
  const trusted = parseTrustedProxies('10.0.0.0/8, 192.168.1.7, fd00::/8')
  const none = parseTrustedProxies(undefined)
  const many = (n: number, address: string): string => Array.from({ length: n }, () => address).join(', ')
  const rows: Array<[string, string, string | string[] | undefined, string, typeof trusted?]> = [
    // name, peer, X-Forwarded-For, client
    ['no header, untrusted peer', '203.0.113.5', undefined, '203.0.113.5'],
    ['no header, trusted peer', '10.0.0.1', undefined, '10.0.0.1'],
    ['spoofed header from an untrusted peer is ignored', '203.0.113.5', '1.1.1.1', '203.0.113.5'],
    ['spoofed header from an untrusted peer, trusted-looking value', '203.0.113.5', '10.0.0.9', '203.0.113.5'],
    ['no proxies configured: header ignored', '10.0.0.1', '1.1.1.1', '10.0.0.1', none],
    ['one proxy', '10.0.0.1', '198.51.100.7', '198.51.100.7'],
    ['client-sent entries left of the real one are ignored', '10.0.0.1', '6.6.6.6, 198.51.100.7', '198.51.100.7'],
    ['chain of trusted proxies is skipped', '10.0.0.1', '6.6.6.6, 198.51.100.7, 192.168.1.7, 10.2.3.4', '198.51.100.7'],
    ['all trusted: the leftmost', '10.0.0.1', '10.0.0.3, 10.0.0.2', '10.0.0.3'],
    ['no spaces', '10.0.0.1', '6.6.6.6,198.51.100.7', '198.51.100.7'],
    ['tabs and spaces', '10.0.0.1', ' \t198.51.100.7 \t', '198.51.100.7'],
    ['repeated headers are joined in order', '10.0.0.1', ['6.6.6.6, 198.51.100.7', '10.0.0.2'], '198.51.100.7'],
    ['repeated headers: the last one is read first', '10.0.0.1', ['198.51.100.7', '203.0.113.9'], '203.0.113.9'],
    ['empty array', '10.0.0.1', [], '10.0.0.1'],
    // the peer itself
    ['IPv4-mapped peer, untrusted', '::ffff:203.0.113.5', '1.1.1.1', '203.0.113.5'],
    ['IPv4-mapped peer, trusted', '::ffff:10.0.0.1', '198.51.100.7', '198.51.100.7'],
    ['peer that is no address', 'garbage', '198.51.100.7', UNKNOWN_ADDRESS],
    ['empty peer', '', undefined, UNKNOWN_ADDRESS],
    // garbage stops the walk at the last good address
    ['garbage entry', '10.0.0.1', 'garbage', '10.0.0.1'],
    ['garbage after a trusted hop', '10.0.0.1', 'garbage, 10.0.0.2', '10.0.0.2'],
    ['garbage left of the client is never reached', '10.0.0.1', 'garbage, 198.51.100.7', '198.51.100.7'],
    ['empty header', '10.0.0.1', '', '10.0.0.1'],
    ['empty entry', '10.0.0.1', '198.51.100.7,,10.0.0.2', '10.0.0.2'],
    ['trailing comma', '10.0.0.1', '198.51.100.7,', '10.0.0.1'],
    ['unknown', '10.0.0.1', 'unknown', '10.0.0.1'],
    ['a host name', '10.0.0.1', 'evil.example', '10.0.0.1'],
    ['leading zeros', '10.0.0.1', '010.0.0.1', '10.0.0.1'],
    ['out of range', '10.0.0.1', '1.2.3.256', '10.0.0.1'],
    ['hex IPv4', '10.0.0.1', '0x7f.0.0.1', '10.0.0.1'],
    ['short IPv4', '10.0.0.1', '127.1', '10.0.0.1'],
    ['integer IPv4', '10.0.0.1', '2130706433', '10.0.0.1'],
    ['quoted', '10.0.0.1', '"198.51.100.7"', '10.0.0.1'],
    ['semicolon list', '10.0.0.1', '198.51.100.7; 6.6.6.6', '10.0.0.1'],
    ['space-separated list', '10.0.0.1', '198.51.100.7 6.6.6.6', '10.0.0.1'],
    ['Forwarded syntax', '10.0.0.1', 'for=198.51.100.7', '10.0.0.1'],
    ['control characters', '10.0.0.1', '198.51.100.7\r\nX-Evil: 1', '10.0.0.1'],
    ['NUL', '10.0.0.1', '198.51.100.7\u0000', '10.0.0.1'],
    ['non-ASCII digits', '10.0.0.1', '١٩٨.51.100.7', '10.0.0.1'],
    ['zone id', '10.0.0.1', 'fe80::1%eth0', '10.0.0.1'],
    ['a CIDR', '10.0.0.1', '198.51.100.0/24', '10.0.0.1'],
    ['an over-long entry', '10.0.0.1', `${' '.repeat(100)}198.51.100.7`, '10.0.0.1'],
    ['a 1 MB entry', '10.0.0.1', 'x'.repeat(1 << 20), '10.0.0.1'],
    // ports and brackets
    ['IPv4 with a port', '10.0.0.1', '198.51.100.7:4711', '198.51.100.7'],
    ['IPv4 with port 0', '10.0.0.1', '198.51.100.7:0', '198.51.100.7'],
    ['IPv4 with a bad port', '10.0.0.1', '198.51.100.7:65536', '10.0.0.1'],
    ['IPv4 with an empty port', '10.0.0.1', '198.51.100.7:', '10.0.0.1'],
    ['IPv4 with a port, trusted', '10.0.0.1', '198.51.100.7, 10.0.0.2:80', '198.51.100.7'],
    ['bracketed IPv6', '10.0.0.1', '[2001:db8::7]', '2001:db8::7'],
    ['bracketed IPv6 with a port', '10.0.0.1', '[2001:DB8::7]:443', '2001:db8::7'],
    ['bracketed IPv6 with a bad port', '10.0.0.1', '[2001:db8::7]:x', '10.0.0.1'],
    ['bracketed IPv4', '10.0.0.1', '[198.51.100.7]', '10.0.0.1'],
    ['unclosed bracket', '10.0.0.1', '[2001:db8::7', '10.0.0.1'],
    ['bracket inside', '10.0.0.1', '2001:db8::7]', '10.0.0.1'],
    ['brackets and a zone', '10.0.0.1', '[fe80::1%25eth0]:80', '10.0.0.1'],
    ['bracketed garbage', '10.0.0.1', '[evil]', '10.0.0.1'],
    // IPv6
    ['IPv6 client via IPv4 proxy', '10.0.0.1', '2001:DB8:0::7', '2001:db8::7'],
    ['IPv6 proxy chain', 'fd00::1', '2001:db8::7, fd12::3', '2001:db8::7'],
    ['IPv6 peer untrusted', '2001:db8::9', '198.51.100.7', '2001:db8::9'],
    ['IPv4-mapped client in the header', '10.0.0.1', '::ffff:198.51.100.7', '198.51.100.7'],
    ['IPv4-mapped trusted hop in the header is skipped', '10.0.0.1', '198.51.100.7, ::ffff:10.0.0.2', '198.51.100.7'],
    // bounded: at most MAX_ENTRIES entries are looked at
    ['10 000 spoofed entries left of the client', '10.0.0.1', `${many(10_000, '6.6.6.6')}, 198.51.100.7`, '198.51.100.7'],
    ['10 000 trusted entries: the walk stops after 32', '10.0.0.1', `198.51.100.7, ${many(10_000, '10.0.0.2')}`, '10.0.0.2'],
    [`${MAX_ENTRIES} trusted entries then the client: not reached`, '10.0.0.1', `198.51.100.7, ${many(MAX_ENTRIES, '10.0.0.2')}`, '10.0.0.2'],
    [`${MAX_ENTRIES - 1} trusted entries then the client: reached`, '10.0.0.1', `198.51.100.7, ${many(MAX_ENTRIES - 1, '10.0.0.2')}`, '198.51.100.7'],
    ['10 000 repeated headers', '10.0.0.1', [...Array.from({ length: 10_000 }, () => '6.6.6.6'), '198.51.100.7'], '198.51.100.7'],
    ['10 000 repeated trusted headers', '10.0.0.1', ['198.51.100.7', ...Array.from({ length: 10_000 }, () => '10.0.0.2')], '10.0.0.2'],
    ['10 000 commas', '10.0.0.1', ','.repeat(10_000), '10.0.0.1'],
  ]
  for (const [name, peer, header, expected, proxies] of rows) {
    t.equal(clientAddress(peer, header, proxies ?? trusted), expected, name)
  }
})

t.test('every answer is a valid, normalized address', async (t) => {
  const trusted = parseTrustedProxies('0.0.0.0/0, ::/0')
  const hostile = ['', ' ', ',', '[', ']', '[]', ':', '::ffff:', '1.2.3.4:', '%', '\u0000', 'a'.repeat(70), '[::1]:99999', '::ffff:1.2.3.4:80', '1.2.3.4:80:80']
  for (const entry of hostile) {
    const answer = clientAddress('10.0.0.1', `198.51.100.7, ${entry}`, trusted)
    t.equal(normalizeAddress(answer), answer, `${show(entry)} → ${answer}`)
  }
})
