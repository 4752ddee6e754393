/**
 * `npm start` on this checkout with no configuration at all: embedded
 * Postgres, a development certificate, no Redis. Drives it as a newcomer
 * would, with the CLI and curl-like HTTPS requests, then stops it with Ctrl-C.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { connect } from 'node:net'
import { Agent, request } from 'undici'
import { childEnv, projectRoot, runCtl } from '../helpers/processes.js'

const insecure = new Agent({ connect: { rejectUnauthorized: false } })

async function get(path: string, key: string): Promise<{ status: number; body: unknown }> {
  const response = await request(`https://127.0.0.1:8443${path}`, { headers: { authorization: `Bearer ${key}` }, dispatcher: insecure })
  return { status: response.statusCode, body: await response.body.json() }
}

t.test('npm start runs the whole stack with no configuration', async (t) => {
  const stack = spawn('npm', ['start'], { cwd: projectRoot, env: childEnv({}), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let output = ''
  stack.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  stack.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => stack.on('exit', (code, signal) => resolve({ code, signal })))
  let ended = false
  void exited.then(() => (ended = true))
  t.teardown(() => {
    if (!ended) process.kill(-stack.pid!, 'SIGKILL')
  })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start not ready:\n${output}`)), 120_000)
    const check = (): void => {
      if (output.includes('Ctrl-C stops everything.')) {
        clearTimeout(timer)
        resolve()
      }
    }
    stack.stdout.on('data', check)
    void exited.then(({ code }) => reject(new Error(`npm start exited ${code}:\n${output}`)))
  })
  t.match(output, /https:\/\/localhost:8443/, 'the banner shows the API URL')
  t.match(output, /ctl -- agency create/, 'the banner shows how to make a first agency')

  const ctl = async (args: string[]): Promise<Record<string, string>> => {
    const result = await runCtl(args, {})
    t.equal(result.status, 0, `ctl ${args.slice(0, 2).join(' ')}: ${result.stderr}`)
    return result.json as Record<string, string>
  }
  const agency = await ctl(['agency', 'create', '--name', 'Quick Start'])
  const sub = await ctl(['sub-account', 'create', '--agency', agency['id']!, '--name', 'First'])
  const key = await ctl(['key', 'create', '--sub-account', sub['id']!, '--name', 'first key'])

  const listed = await get('/v1/agents', key['key']!)
  t.equal(listed.status, 200)
  t.match(listed.body, { success: true, data: [], pagination: { limit: 20, hasMore: false } })

  await ctl(['key', 'revoke', key['id']!])
  const revoked = await get('/v1/agents', key['key']!)
  t.equal(revoked.status, 401, 'the revoke takes effect on the very next request')
  t.same(revoked.body, { success: false, message: 'Invalid or revoked API key' })

  // Ctrl-C in a terminal signals the whole foreground process group: npm, its shell and the stack.
  process.kill(-stack.pid!, 'SIGINT')
  const { code, signal } = await exited
  t.ok(code === 0 || signal === 'SIGINT', `npm start ends on Ctrl-C (code ${code}, signal ${signal})`)
  for (const port of [8443, 8080, 9090, 4001, 4002, 25432]) {
    t.equal(await closedWithin(port, 20_000), true, `nothing is left listening on ${port}`)
  }
  t.match(output, /stopping…/)
})

/** npm may end before the stack has finished stopping; give it a moment. */
async function closedWithin(port: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (!(await listening(port))) return true
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return false
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => (socket.destroy(), resolve(true)))
    socket.once('error', () => resolve(false))
  })
}
