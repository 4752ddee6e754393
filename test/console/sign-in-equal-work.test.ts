/**
 * A refused sign-in costs the same password work whether the email is known
 * or not: one scrypt either way, the first attempt of the process included.
 * Counted, not timed: node:crypto's scrypt is wrapped in a counter (and the
 * named exports every module imported are synced to it), and everything
 * else is the real console.
 */
import crypto from 'node:crypto'
import { syncBuiltinESMExports } from 'node:module'
import t from 'tap'
import { ConsoleClient, createWorld, PASSWORD, startConsole } from './console-harness.js'

t.test('a refused sign-in runs the password hash once, for a known email and an unknown one alike', async (t) => {
  let runs = 0
  const original = crypto.scrypt
  crypto.scrypt = ((...args: Parameters<typeof crypto.scrypt>) => {
    runs++
    return (original as (...a: unknown[]) => void)(...args)
  }) as typeof crypto.scrypt
  syncBuiltinESMExports()
  t.teardown(() => {
    crypto.scrypt = original
    syncBuiltinESMExports()
  })
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)

  const attempts = [
    ['the first attempt of the process, an unknown email', 'nobody@example.test', PASSWORD],
    ['a known email, a wrong password', world.owner.email, 'not the password at all'],
    ['another unknown email', 'nobody-else@example.test', 'not the password at all'],
    ['a known email again', world.admin.email, 'still not the password'],
  ] as const
  for (const [index, [what, email, password]] of attempts.entries()) {
    // A client address of its own for each, so the throttle has no say.
    const client = new ConsoleClient(app, `198.51.100.${index + 10}`)
    const before = runs
    const response = await client.signIn(email, password)
    t.equal(response.statusCode, 401, `${what}: refused`)
    t.equal(runs - before, 1, `${what}: one scrypt (ran ${runs - before})`)
  }
  const before = runs
  t.equal((await new ConsoleClient(app, '198.51.100.50').signIn(world.owner.email, PASSWORD)).statusCode, 303, 'the right password signs in')
  t.equal(runs - before, 1, 'one scrypt for a sign-in whose hash is current (the counter sees the real work)')
})
