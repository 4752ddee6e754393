/**
 * Console sign-in throttling, its machinery: a refused attempt is decided
 * from memory without a database statement; replicas share counts through
 * Postgres; concurrent guesses cannot overshoot; subjects hold only hashes
 * (an IPv6 client by its /64); memory is bounded.
 */
import t from 'tap'
import type { Pool } from '@scoped/shared/db'
import {
  clientKey,
  DEFAULT_MAX_SUBJECTS,
  MAX_FAILURES_PER_CLIENT,
  MAX_FAILURES_PER_EMAIL_AND_CLIENT,
  MAX_FAILURES_PER_NETWORK,
  SIGN_IN_WINDOW_MS,
  SignInThrottle,
  signInSubjects,
} from '@scoped/agency-service/console/sign-in-throttle'
import { createTestDatabase } from '../helpers/database.js'
import { buildConsoleApp, ConsoleClient, createWorld, csrfToken, PASSWORD, startConsole, TestClock } from './console-harness.js'

const WRONG = 'definitely not the password'

/** The pool, counting every statement (and every client checked out for a transaction) made through it. */
function counting(pool: Pool): { pool: Pool; statements: () => number; reset: () => void } {
  let statements = 0
  const proxy = new Proxy(pool, {
    get(target, property) {
      if (property === 'query' || property === 'connect') {
        return (...args: unknown[]) => {
          statements++
          return (target[property] as (...a: unknown[]) => unknown).apply(target, args)
        }
      }
      const value: unknown = Reflect.get(target, property, target)
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
  return { pool: proxy, statements: () => statements, reset: () => (statements = 0) }
}

/** Signs in with the form of a freshly loaded page, counting only the statements of the POST. */
async function postSignIn(
  client: ConsoleClient,
  email: string,
  password: string,
  meter?: { reset: () => void },
): Promise<Awaited<ReturnType<ConsoleClient['post']>>> {
  const page = await client.get('/console/sign-in')
  meter?.reset()
  return client.post('/console/sign-in', { csrf: csrfToken(page.body), email, password })
}

t.test('a throttled attempt is refused without a single database statement', async (t) => {
  const db = await createTestDatabase(t)
  const meter = counting(db.pool)
  const { app } = await buildConsoleApp(meter.pool)
  t.teardown(() => app.close())
  const world = await createWorld(db.pool)

  const guesser = new ConsoleClient(app, '198.51.100.70')
  for (let i = 0; i < MAX_FAILURES_PER_EMAIL_AND_CLIENT; i++) await postSignIn(guesser, world.owner.email, WRONG)
  for (let i = 0; i < 3; i++) {
    const refused = await postSignIn(guesser, world.owner.email, PASSWORD, meter)
    t.equal(refused.statusCode, 429)
    t.equal(meter.statements(), 0, `refusal ${i + 1} made no SQL statement`)
  }
  const allowed = await postSignIn(new ConsoleClient(app, '198.51.100.71'), world.owner.email, WRONG, meter)
  t.equal(allowed.statusCode, 401)
  t.ok(
    meter.statements() >= 3 && meter.statements() <= 5,
    `an attempt that is let through reads the shared count, the user, records its failure and counts the known user's refusal (${meter.statements()} statements)`,
  )

  const sprayer = new ConsoleClient(app, '192.0.2.80')
  for (let i = 0; i < MAX_FAILURES_PER_CLIENT; i++) await postSignIn(sprayer, `nobody-${i}@example.test`, WRONG)
  const sprayed = await postSignIn(sprayer, `nobody-else@example.test`, WRONG, meter)
  t.equal(sprayed.statusCode, 429, `after ${MAX_FAILURES_PER_CLIENT} failures over many emails the client is throttled`)
  t.equal(meter.statements(), 0, 'without a statement either')
})

t.test('replicas share the counts through Postgres; once one has seen them it refuses from memory', async (t) => {
  const db = await createTestDatabase(t)
  const clock = new TestClock()
  const meter = counting(db.pool)
  const one = await buildConsoleApp(db.pool, undefined, clock)
  const two = await buildConsoleApp(meter.pool, undefined, clock)
  t.teardown(() => Promise.all([one.app.close(), two.app.close()]))
  const world = await createWorld(db.pool)
  const address = '198.51.100.90'
  for (let i = 1; i <= MAX_FAILURES_PER_EMAIL_AND_CLIENT; i++) {
    const app = i % 2 === 0 ? one.app : two.app
    t.equal((await new ConsoleClient(app, address).signIn(world.owner.email, WRONG)).statusCode, 401, `failure ${i}, on replica ${i % 2 === 0 ? 'one' : 'two'}`)
  }
  t.equal((await new ConsoleClient(one.app, address).signIn(world.owner.email)).statusCode, 429, 'replica one')
  t.equal((await new ConsoleClient(two.app, address).signIn(world.owner.email)).statusCode, 429, 'replica two')
  t.equal((await postSignIn(new ConsoleClient(two.app, address), world.owner.email, PASSWORD, meter)).statusCode, 429)
  t.equal(meter.statements(), 0, 'replica two now refuses from memory')

  clock.advance(SIGN_IN_WINDOW_MS + 1000)
  t.equal((await new ConsoleClient(two.app, address).signIn(world.owner.email)).statusCode, 303, 'after the window the right password works again')
})

t.test('concurrent guesses cannot overshoot the limit', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const guesses = await Promise.all(Array.from({ length: 12 }, () => new ConsoleClient(app, '198.51.100.33').signIn(world.owner.email, WRONG)))
  const checked = guesses.filter((response) => response.statusCode === 401).length
  // The line of password checks refuses strangers past its budget at once; the throttle bounds the rest.
  t.ok(checked >= 1 && checked <= MAX_FAILURES_PER_EMAIL_AND_CLIENT, `${checked} passwords were checked`)
  t.equal(guesses.filter((response) => response.statusCode === 429).length, 12 - checked, 'the rest were refused')
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM console_sign_in_failures')
  t.equal(rows[0]!.n, 3 * checked, 'refused attempts leave no rows behind (a checked one: its client, (email, client) and network)')
})

t.test('subjects: a known device alone, else the client (IPv6 by its /64), the (email, client) pair and the network', async (t) => {
  t.same(
    signInSubjects('a@example.test', '192.0.2.1', undefined).map((subject) => [subject.kind, subject.limit]),
    [
      ['client', MAX_FAILURES_PER_CLIENT],
      ['email-client', MAX_FAILURES_PER_EMAIL_AND_CLIENT],
      ['network', MAX_FAILURES_PER_NETWORK],
    ],
  )
  t.same(
    signInSubjects('a@example.test', '192.0.2.1', { userId: 'u', deviceId: 'd' }).map((subject) => subject.kind),
    ['device'],
  )
  t.equal(clientKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
  t.equal(clientKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64', 'the whole /64 is one client')
  t.equal(clientKey('::ffff:192.0.2.9'), '192.0.2.9', 'IPv4-mapped is IPv4')
  t.notSame(
    signInSubjects('a@example.test', '2001:db8:1:2::1', undefined)[0]?.hash,
    signInSubjects('a@example.test', '2001:db8:1:3::1', undefined)[0]?.hash,
    'another /64 is another client',
  )
  for (const subject of signInSubjects('a@example.test', '192.0.2.1', undefined)) t.match(subject.hash, /^[0-9a-f]{64}$/, 'only hashes are kept')
})

t.test('memory is bounded: past its size the least recently touched subject goes', async (t) => {
  const fake = { query: async () => ({ rows: [], rowCount: 0 }) } as unknown as Pool
  const throttle = new SignInThrottle(fake, { maxSubjects: 10 })
  const now = new Date()
  for (let i = 0; i < 100; i++) {
    const attempt = await throttle.begin(signInSubjects(`user${i}@example.test`, `192.0.2.${i}`, undefined), now)
    if (attempt.allowed) await throttle.failed(attempt)
  }
  t.ok(throttle.size <= 10, `${throttle.size} subjects held`)
  t.ok(DEFAULT_MAX_SUBJECTS >= 10_000, 'the default holds a real attack')
})
