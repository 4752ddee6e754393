/** The benchmark's round order: every target once a round, rotated, the bare proxy and the gateway always adjacent. */
import t from 'tap'
import { roundOrder } from '../../scripts/bench/rounds.js'
import { BARE, GATEWAY, NO_CHECKS } from '../../scripts/bench/summary.js'

const named = (...names: string[]): Array<{ name: string }> => names.map((name) => ({ name }))

t.test('the bare proxy and the gateway are measured one right after the other, first one then the other', async (t) => {
  const targets = named('upstream alone', BARE, 'nginx', NO_CHECKS, GATEWAY)
  const firsts = new Set<string>()
  const seen = new Set<string>()
  for (let round = 1; round <= 8; round++) {
    const order = roundOrder(targets, round).map((target) => target.name)
    t.same([...order].sort(), targets.map((target) => target.name).sort(), `round ${round}: every target once`)
    const bare = order.indexOf(BARE)
    const gateway = order.indexOf(GATEWAY)
    t.equal(Math.abs(bare - gateway), 1, `round ${round}: adjacent (${order.join(', ')})`)
    firsts.add(bare < gateway ? BARE : GATEWAY)
    seen.add(order[0]!)
  }
  t.same([...firsts].sort(), [BARE, GATEWAY].sort(), 'each goes first in some rounds')
  t.equal(seen.size, 4, 'every unit of the rotation starts some round')
})

t.test('without both of them, a plain rotation', async (t) => {
  const targets = named('a', 'b', 'c')
  t.same(
    [1, 2, 3].map((round) =>
      roundOrder(targets, round)
        .map((target) => target.name)
        .join(''),
    ),
    ['abc', 'bca', 'cab'],
  )
})
