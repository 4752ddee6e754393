/**
 * Invariants of the container image, read from the Dockerfile (no Docker
 * needed): a Node 24 LTS base, production dependencies and compiled output only,
 * every workspace present, and an unprivileged numeric user.
 */
import t from 'tap'
import { parseDockerfile, readProjectFile } from './deploy-files.js'

const instructions = parseDockerfile(readProjectFile('Dockerfile'))
const finalStage = Math.max(...instructions.map((instruction) => instruction.stage))
const runtime = instructions.filter((instruction) => instruction.stage === finalStage)
const build = instructions.filter((instruction) => instruction.stage !== finalStage)
const workspaces = (JSON.parse(readProjectFile('package.json')) as { workspaces: string[] }).workspaces

function runs(stage: typeof instructions, command: string): boolean {
  return stage.some((instruction) => instruction.keyword === 'RUN' && instruction.argument.includes(command))
}

function copies(stage: typeof instructions, argument: string): boolean {
  return stage.some((instruction) => instruction.keyword === 'COPY' && instruction.argument === argument)
}

t.test('a multi-stage build on node:24, the LTS', async (t) => {
  const bases = instructions.filter((instruction) => instruction.keyword === 'FROM').map((instruction) => instruction.argument)
  t.ok(bases.length >= 2, 'a build stage and a runtime stage')
  for (const base of bases) t.match(base, /^node:24(-[a-z]+)?(@sha256:[0-9a-f]{64})? AS [a-z-]+$/, `${base} is a Node 24 image`)
})

t.test('the build stage compiles the TypeScript', async (t) => {
  t.ok(runs(build, 'npm ci'), 'installs the build dependencies')
  t.ok(runs(build, 'npx tsc -b'), 'compiles every package')
})

t.test('the runtime stage holds production dependencies and compiled output only', async (t) => {
  t.ok(runs(runtime, 'npm ci --omit=dev'), 'npm ci --omit=dev')
  t.notOk(
    runtime.some(
      (instruction) => instruction.keyword === 'RUN' && /npm (ci|install)\b/.test(instruction.argument) && !instruction.argument.includes('--omit=dev'),
    ),
    'no install with development dependencies',
  )
  for (const workspace of workspaces) {
    t.ok(copies(runtime, `${workspace}/package.json ${workspace}/`), `${workspace}/package.json, so npm ci links the workspace`)
    t.ok(copies(runtime, `--from=build /app/${workspace}/dist ${workspace}/dist`), `${workspace}/dist from the build stage`)
    const exports = (JSON.parse(readProjectFile(`${workspace}/package.json`)) as { exports: Record<string, { default?: string }> }).exports
    t.equal(exports['./*']?.default, './dist/*.js', `${workspace} resolves to its compiled output without a TypeScript loader`)
  }
  t.notOk(
    runtime.some((instruction) => instruction.keyword === 'COPY' && /(^|\s|\/)src(\s|\/|$)/.test(instruction.argument)),
    'no TypeScript source in the runtime stage',
  )
  t.ok(copies(runtime, 'shared/migrations shared/migrations'), 'the SQL migrations, read at run time')
  t.ok(copies(runtime, 'deploy/routes.yaml deploy/routes.yaml'), 'the default route map')
  t.ok(copies(runtime, 'deploy/openapi.json deploy/openapi.json'), 'the API description the gateway serves')
})

t.test('the process runs as a numeric non-root user', async (t) => {
  const users = runtime.filter((instruction) => instruction.keyword === 'USER')
  const user = users.at(-1)?.argument ?? ''
  t.match(user, /^[0-9]+(:[0-9]+)?$/, 'numeric, so runAsNonRoot can verify it')
  t.ok(Number(user.split(':')[0]) > 0, 'not root')
  t.ok(Number(user.split(':')[1] ?? '1') > 0, 'not the root group')
  t.ok(runs(runtime, `useradd --system --uid ${user.split(':')[0]}`), 'the uid has an account (the CLI reads its name)')
})

t.test('the default command is the compiled gateway', async (t) => {
  const command = runtime.filter((instruction) => instruction.keyword === 'CMD').at(-1)?.argument
  t.same(JSON.parse(command ?? 'null'), ['node', 'gateway/dist/main.js'])
})

t.test('.dockerignore admits only what the build reads', async (t) => {
  const patterns = readProjectFile('.dockerignore')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
  t.equal(patterns[0], '*', 'an allowlist: everything is excluded first')
  t.notOk(
    patterns.some((pattern) => pattern.startsWith('!') && /\.env|\.data|^!deploy\/?$/.test(pattern)),
    'no secret or local state re-admitted',
  )
  t.ok(patterns.includes('!deploy/openapi.json'), 'the API description is in the build context')
  for (const excluded of ['**/node_modules', '**/dist']) t.ok(patterns.includes(excluded), `${excluded} stays out`)
})
