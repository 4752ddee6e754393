/**
 * The README's client examples, taken from the README itself and run as a
 * reader would run them, so that they cannot drift from what the gateway
 * does: the shell ones under `sh` (the key made with `ctl`, then curl), the
 * Node one with `node`, the Python one with `python3`. Only what a reader
 * changes is changed: the sub-account id (`S=...`), and, for a stack that is
 * not `npm start`'s, its address and certificate.
 */
import { spawn } from 'node:child_process'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { childEnv, projectRoot } from './processes.js'
import type { ProcessEnv } from './processes.js'

/** Where `npm start` answers, as the examples are written. */
export const README_API = 'https://localhost:8443'
export const README_CA_FILE = '.data/dev-tls/cert.pem'
const SUB_ACCOUNT_LINE = /^S=\.\.\.(.*)$/m

export interface ReadmeExamples {
  /** The fenced blocks of "## Client examples" by language, in order. */
  blocks: Record<string, string[]>
}

/** The fenced code blocks of the README's "Client examples" section (before its first subsection), by their language. */
export function readmeExamples(): ReadmeExamples {
  const readme = readFileSync(join(projectRoot, 'README.md'), 'utf8')
  const start = readme.indexOf('## Client examples')
  if (start === -1) throw new Error('README.md has no "## Client examples" section')
  // Up to the next heading: the typed client's subsection has a test of its own (test/e2e/typed-client.test.ts).
  const after = readme.slice(start + 1).search(/\n###? /)
  const end = after === -1 ? -1 : start + 1 + after
  const section = readme.slice(start, end === -1 ? undefined : end)
  const blocks: Record<string, string[]> = {}
  for (const match of section.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)) (blocks[match[1]!] ??= []).push(match[2]!)
  return { blocks }
}

/** Where the examples run: the stack's address and certificate file (npm start's when left out), and the sub-account of the key. */
export interface ExampleTarget {
  subAccountId: string
  api?: string
  caFile?: string
  /** Environment for ctl (DATABASE_URL …) when the stack is not npm start's. */
  env?: ProcessEnv
}

/** Replaces `from` everywhere in `text`, failing when it is not there: a substitution that matched nothing would test nothing. */
function substitute(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the README example no longer contains ${from}`)
  return text.split(from).join(to)
}

function retarget(text: string, target: ExampleTarget): string {
  let result = text
  if (target.api !== undefined) result = substitute(result, README_API, target.api)
  if (target.caFile !== undefined) result = substitute(result, README_CA_FILE, target.caFile)
  return result
}

export interface RunResult {
  status: number | null
  stdout: string
  stderr: string
}

export function run(command: string, args: string[], env: ProcessEnv, cwd = projectRoot): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (status) => resolve({ status, stdout, stderr }))
  })
}

/** The shell examples as one `sh` script, from the project root: the key block (its `S=...` set), then curl. */
export function runShellExamples(examples: ReadmeExamples, target: ExampleTarget, dir: string): Promise<RunResult> {
  const blocks = examples.blocks['sh'] ?? []
  if (blocks.length < 2) throw new Error('the README has no key block and curl block under "## Client examples"')
  const [keyBlock, ...others] = blocks
  if (!SUB_ACCOUNT_LINE.test(keyBlock!)) throw new Error('the README key block no longer starts with S=...')
  const script = [keyBlock!.replace(SUB_ACCOUNT_LINE, `S=${target.subAccountId}$1`), ...others.map((block) => retarget(block, target))].join('\n')
  const file = join(dir, 'examples.sh')
  writeFileSync(file, script)
  return run('sh', [file], target.env ?? {})
}

/** The Node example as agents.mjs, with `KEY` and the certificate in its environment, as the README says. */
export function runNodeExample(examples: ReadmeExamples, target: ExampleTarget, key: string, dir: string): Promise<RunResult> {
  const [block] = examples.blocks['js'] ?? []
  if (block === undefined) throw new Error('the README has no Node example')
  const file = join(dir, 'agents.mjs')
  writeFileSync(file, retarget(block, { ...target, caFile: undefined }))
  return run(process.execPath, [file], { KEY: key, NODE_EXTRA_CA_CERTS: target.caFile ?? join(projectRoot, README_CA_FILE) })
}

/** Why the Python example cannot run here, or undefined when python3 with requests is present. */
export function pythonMissing(): string | undefined {
  const probe = spawnSync('python3', ['-c', 'import requests'], { encoding: 'utf8' })
  if (probe.error !== undefined) return `python3 is not installed (${probe.error.message})`
  if (probe.status !== 0) return `python3 has no requests module (pip install requests): ${probe.stderr.trim()}`
  return undefined
}

/** The Python example as agents.py, with `KEY` in its environment, as the README says. */
export function runPythonExample(examples: ReadmeExamples, target: ExampleTarget, key: string, dir: string): Promise<RunResult> {
  const [block] = examples.blocks['python'] ?? []
  if (block === undefined) throw new Error('the README has no Python example')
  const file = join(dir, 'agents.py')
  writeFileSync(file, retarget(block, target))
  return run('python3', [file], { KEY: key })
}
