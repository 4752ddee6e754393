/**
 * The pure rules of webhooks, row by row: which addresses are public, which
 * URLs may be registered, and the retry schedule the contract fixes.
 */
import t from 'tap'
import { isPublicAddress, urlProblem } from '@scoped/agency-service/webhooks/address-policy'
import { CONTRACT_RETRY_SCHEDULE, nextAttemptAt, retryDelayMs } from '@scoped/agency-service/webhooks/retry-schedule'

t.test('only public unicast addresses are public', async (t) => {
  const rows: Array<[string, boolean, string]> = [
    ['93.184.216.34', true, 'a public IPv4 address'],
    ['8.8.8.8', true, 'another'],
    ['2606:4700:4700::1111', true, 'a public IPv6 address'],
    ['127.0.0.1', false, 'loopback'],
    ['127.255.0.9', false, 'loopback, anywhere in 127/8'],
    ['10.1.2.3', false, 'private 10/8'],
    ['172.16.5.4', false, 'private 172.16/12'],
    ['192.168.1.1', false, 'private 192.168/16'],
    ['169.254.169.254', false, 'the cloud metadata address'],
    ['169.254.1.1', false, 'link-local'],
    ['100.64.0.1', false, 'CGNAT 100.64/10'],
    ['100.127.255.254', false, 'CGNAT, its end'],
    ['224.0.0.1', false, 'multicast'],
    ['0.0.0.0', false, 'unspecified'],
    ['255.255.255.255', false, 'broadcast'],
    ['192.0.2.1', false, 'documentation'],
    ['240.0.0.1', false, 'reserved'],
    ['::1', false, 'IPv6 loopback'],
    ['::', false, 'IPv6 unspecified'],
    ['fe80::1', false, 'IPv6 link-local'],
    ['fe80::1%eth0', false, 'with a zone'],
    ['fc00::1', false, 'IPv6 unique-local'],
    ['fd12:3456::1', false, 'IPv6 unique-local'],
    ['ff02::1', false, 'IPv6 multicast'],
    ['::ffff:127.0.0.1', false, 'IPv4-mapped loopback'],
    ['::ffff:7f00:1', false, 'IPv4-mapped loopback, hex'],
    ['::ffff:169.254.169.254', false, 'IPv4-mapped metadata'],
    ['::ffff:8.8.8.8', false, 'IPv4-mapped, even of a public address'],
    ['64:ff9b::7f00:1', false, 'NAT64 of loopback'],
    ['2002:7f00:1::', false, '6to4 of loopback'],
    ['2001:db8::1', false, 'IPv6 documentation'],
    ['example.com', false, 'not an address'],
    ['', false, 'empty'],
  ]
  for (const [address, expected, why] of rows) t.equal(isPublicAddress(address), expected, `${address}: ${why}`)
})

t.test('which URLs may be registered', async (t) => {
  const strict = { allowPrivateAddresses: false }
  const relaxed = { allowPrivateAddresses: true }
  const rows: Array<[string, string | undefined, string | undefined]> = [
    ['https://hooks.example.com/in', undefined, undefined],
    ['https://93.184.216.34:8443/in', undefined, undefined],
    ['http://hooks.example.com/in', 'must be an https:// URL', undefined],
    ['ftp://hooks.example.com/in', 'must be an https:// URL', 'must be an https:// or http:// URL'],
    ['not a url', 'must be an absolute URL', 'must be an absolute URL'],
    ['https://127.0.0.1/in', 'must not point to a loopback, private, link-local or otherwise non-public address', undefined],
    ['https://2130706433/in', 'must not point to a loopback, private, link-local or otherwise non-public address', undefined],
    ['https://0x7f.1/in', 'must not point to a loopback, private, link-local or otherwise non-public address', undefined],
    ['https://[::1]/in', 'must not point to a loopback, private, link-local or otherwise non-public address', undefined],
    ['https://[::ffff:127.0.0.1]/in', 'must not point to a loopback, private, link-local or otherwise non-public address', undefined],
    ['https://169.254.169.254/latest/meta-data', 'must not point to a loopback, private, link-local or otherwise non-public address', undefined],
    ['https://10.0.0.7/in', 'must not point to a loopback, private, link-local or otherwise non-public address', undefined],
    ['https://localhost/in', 'must name a public host', undefined],
    ['https://hooks.localhost/in', 'must name a public host', undefined],
    ['https://intranet/in', 'must name a public host', undefined],
    ['https://user:secret@hooks.example.com/in', 'must not contain a user name or password', 'must not contain a user name or password'],
    ['https://hooks.example.com/in#part', 'must not contain a fragment', 'must not contain a fragment'],
    [`https://hooks.example.com/${'a'.repeat(2000)}`, 'must be at most 2000 characters', 'must be at most 2000 characters'],
  ]
  for (const [url, strictProblem, relaxedProblem] of rows) {
    t.equal(urlProblem(url, strict), strictProblem, `${url.slice(0, 60)} (strict)`)
    t.equal(urlProblem(url, relaxed), relaxedProblem, `${url.slice(0, 60)} (WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1)`)
  }
})

t.test("the contract's retry schedule: 5 s, 30 s, 2 min, 10 min, 1 h, then every 6 h until 72 h after the event", async (t) => {
  const second = 1000
  const hour = 3600 * second
  t.same(
    [1, 2, 3, 4, 5, 6, 7, 20].map((attempts) => retryDelayMs(attempts, CONTRACT_RETRY_SCHEDULE)),
    [5 * second, 30 * second, 120 * second, 600 * second, hour, 6 * hour, 6 * hour, 6 * hour],
  )
  // Walk a message that always fails from its event on: attempts until the next would fall after 72 h.
  const event = new Date('2026-01-01T00:00:00Z')
  const giveUpAt = new Date(event.getTime() + 72 * hour)
  const attemptsAt: number[] = [0]
  for (let at: Date | null = event, attempts = 1; at !== null; attempts++) {
    at = nextAttemptAt(attempts, at, giveUpAt, CONTRACT_RETRY_SCHEDULE)
    if (at !== null) attemptsAt.push(at.getTime() - event.getTime())
  }
  t.same(attemptsAt.slice(0, 6), [0, 5 * second, 35 * second, 155 * second, 755 * second, 755 * second + hour], 'the first six attempts')
  t.ok(
    attemptsAt.every((offset) => offset <= 72 * hour),
    'none after 72 h',
  )
  t.ok(72 * hour - attemptsAt.at(-1)! < 6 * hour, 'the last within 6 h of the end')
  t.equal(attemptsAt.length, 17, 'seventeen attempts in all')
})
