import t from 'tap'
import { MAX_FAILURES_PER_CLIENT, MAX_FAILURES_PER_EMAIL, SIGN_IN_WINDOW_MS } from '@scoped/agency-service/console/sign-in-throttle'
import { createTestDatabase } from '../helpers/database.js'
import { buildConsoleApp, ConsoleClient, createWorld, PASSWORD, startConsole, TestClock } from './console-harness.js'

const WRONG = 'definitely not the password'

t.test(`after ${MAX_FAILURES_PER_EMAIL} failures for one email, even the right password is refused with 429 for the window`, async (t) => {
  const { app, pool, clock } = await startConsole(t)
  const world = await createWorld(pool)

  for (let i = 1; i <= MAX_FAILURES_PER_EMAIL; i++) {
    // From different clients: the email's own limit applies, however the attempts are spread.
    t.equal((await new ConsoleClient(app, `198.51.100.${i}`).signIn(world.owner.email, WRONG)).statusCode, 401, `failure ${i}`)
  }
  const throttled = await new ConsoleClient(app, '198.51.100.99').signIn(world.owner.email, PASSWORD)
  t.equal(throttled.statusCode, 429)
  t.match(throttled.body, 'Too many failed sign-in attempts')
  t.match(throttled.body, /role="alert"/)
  t.ok(throttled.headers['retry-after'], 'says when to retry')
  t.equal((await pool.query('SELECT 1 FROM console_sessions')).rowCount, 0, 'no session was made')

  t.equal((await new ConsoleClient(app, '198.51.100.99').signIn(world.admin.email)).statusCode, 303, 'another account is not affected')

  clock.advance(SIGN_IN_WINDOW_MS + 1000)
  t.equal((await new ConsoleClient(app, '198.51.100.99').signIn(world.owner.email)).statusCode, 303, 'after the window the right password works again')
})

t.test('a successful sign-in forgives the earlier failures of that email', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const client = (): ConsoleClient => new ConsoleClient(app, '198.51.100.7')
  for (let i = 1; i < MAX_FAILURES_PER_EMAIL; i++) await client().signIn(world.owner.email, WRONG)
  t.equal((await client().signIn(world.owner.email)).statusCode, 303)
  for (let i = 1; i < MAX_FAILURES_PER_EMAIL; i++) t.equal((await client().signIn(world.owner.email, WRONG)).statusCode, 401)
  t.equal((await client().signIn(world.owner.email)).statusCode, 303, 'the count started again')
})

t.test(`after ${MAX_FAILURES_PER_CLIENT} failures from one client, that client is refused with 429 whatever the email`, async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const sprayer = '192.0.2.66'
  for (let i = 1; i <= MAX_FAILURES_PER_CLIENT; i++) {
    t.equal((await new ConsoleClient(app, sprayer).signIn(`guess${i}@example.test`, WRONG)).statusCode, 401)
  }
  t.equal((await new ConsoleClient(app, sprayer).signIn(world.owner.email)).statusCode, 429, 'the client is throttled')
  t.equal((await new ConsoleClient(app, '192.0.2.67').signIn(world.owner.email)).statusCode, 303, 'another client is not')
})

t.test('throttling is stored in Postgres: it holds across processes sharing the database', async (t) => {
  const db = await createTestDatabase(t)
  const clock = new TestClock()
  const one = await buildConsoleApp(db.pool, undefined, clock)
  const two = await buildConsoleApp(db.pool, undefined, clock)
  t.teardown(() => Promise.all([one.app.close(), two.app.close()]))
  const world = await createWorld(db.pool)

  for (let i = 1; i <= MAX_FAILURES_PER_EMAIL; i++) {
    const app = i % 2 === 0 ? one.app : two.app
    t.equal((await new ConsoleClient(app, `198.51.100.${i}`).signIn(world.owner.email, WRONG)).statusCode, 401)
  }
  t.equal((await new ConsoleClient(one.app).signIn(world.owner.email)).statusCode, 429, 'instance one')
  t.equal((await new ConsoleClient(two.app).signIn(world.owner.email)).statusCode, 429, 'instance two')
})

t.test('concurrent guesses cannot overshoot the limit', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const guesses = await Promise.all(Array.from({ length: 12 }, (_, i) => new ConsoleClient(app, `198.51.100.${i + 1}`).signIn(world.owner.email, WRONG)))
  const checked = guesses.filter((response) => response.statusCode === 401).length
  t.ok(checked <= MAX_FAILURES_PER_EMAIL, `${checked} passwords were checked`)
  t.equal(guesses.filter((response) => response.statusCode === 429).length, 12 - checked, 'the rest were throttled')
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM console_sign_in_failures')
  t.ok(rows[0]!.n <= 2 * MAX_FAILURES_PER_EMAIL, 'throttled attempts leave no rows behind')
})
