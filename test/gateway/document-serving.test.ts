/**
 * The pieces of serving a document, table by table: the budget per client
 * (bounded memory, windows that end, IPv6 by /64), the choice of coding, and
 * If-None-Match.
 */
import t from 'tap'
import { DocumentBudget } from '@scoped/gateway/document-budget'
import { chooseRepresentation, encodeDocument, matchesIfNoneMatch } from '@scoped/gateway/encoded-document'

t.test('the budget: limit per client and window, IPv6 by /64, bounded memory', async (t) => {
  const clock = { now: 0 }
  const budget = new DocumentBudget(2, 60_000, 3, () => clock.now)
  t.match(budget.take('203.0.113.9'), { allowed: true, remaining: 1, resetSeconds: 60 })
  t.match(budget.take('203.0.113.9'), { allowed: true, remaining: 0 })
  clock.now = 15_500
  t.same(budget.take('203.0.113.9'), { allowed: false, retryAfterSeconds: 45 }, 'over: until its window ends')
  t.match(budget.take('::ffff:203.0.113.9'), { allowed: false }, 'the same address, IPv4-mapped')
  t.match(budget.take('2001:db8::1'), { allowed: true })
  t.match(budget.take('2001:db8::2'), { allowed: true })
  t.match(budget.take('2001:db8:0:0:ffff::3'), { allowed: false }, 'one /64, one budget')
  t.match(budget.take('2001:db8:0:1::1'), { allowed: true }, 'the next /64')
  t.equal(budget.size, 3, 'three clients')
  t.match(budget.take('198.51.100.1'), { allowed: true })
  t.equal(budget.size, 3, 'at most three: the oldest window made room')
  t.match(budget.take('203.0.113.9'), { allowed: true }, 'so its client starts again (memory is bounded, not the budget of the clients it still holds)')
  clock.now = 200_000
  t.match(budget.take('2001:db8:0:1::1'), { allowed: true, remaining: 1 }, 'a new window')
  t.equal(budget.size, 1, 'ended windows are dropped as they are met')
})

t.test('If-None-Match: *, lists, weak comparison', async (t) => {
  const rows: Array<[string | undefined, boolean]> = [
    [undefined, false],
    ['"abc"', true],
    ['W/"abc"', true],
    ['"x", "abc"', true],
    ['"x",W/"abc" ', true],
    ['*', true],
    ['"abc-br"', false],
    ['abc', false],
    ['', false],
  ]
  for (const [header, matches] of rows) t.equal(matchesIfNoneMatch(header, '"abc"'), matches, String(header))
})

t.test('a small document is kept only as it is; a large one in every coding, chosen by Accept-Encoding', async (t) => {
  const small = await encodeDocument('x', 'text/plain')
  t.same(
    small.representations.map((representation) => representation.coding),
    ['identity'],
    'compressing one byte saves nothing',
  )
  t.equal(chooseRepresentation(small, 'br').coding, 'identity')
  const large = await encodeDocument('the same words again and again '.repeat(200), 'text/plain')
  t.same(
    large.representations.map((representation) => representation.coding),
    ['br', 'gzip', 'identity'],
  )
  const rows: Array<[string | undefined, string]> = [
    [undefined, 'identity'],
    ['', 'identity'],
    ['gzip, br', 'br'],
    ['br;q=0.1, gzip;q=0.2', 'gzip'],
    ['*;q=0, gzip', 'gzip'],
    ['identity;q=0', 'identity'],
  ]
  for (const [accept, coding] of rows) t.equal(chooseRepresentation(large, accept).coding, coding, String(accept))
  t.equal(new Set(large.representations.map((representation) => representation.etag)).size, 3, 'an ETag per coding')
})
