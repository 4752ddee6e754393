/**
 * The certificates of the internal hop for deploy/compose.yaml's one-shot
 * `certs` job: a private CA, a server certificate for each backend and the
 * gateway's client certificate, each in a directory of its own (one volume
 * each, so a container mounts only its own key):
 *
 *   node gateway/dist/internal-certificates.js <dir> server:agency-service server:resource-service client:gateway
 *
 * writes <dir>/ca/{ca.crt,ca.key} and <dir>/<name>/{tls.crt,tls.key,ca.crt}
 * (cert-manager's file names, so the deployments mount the same paths). Run
 * again, it keeps what is still good: a leaf is made anew when missing, not
 * signed by the CA, or within RENEW_BEFORE of its end; the CA likewise (and
 * then every leaf). A server certificate names the service (its compose host
 * name); a client certificate is for client authentication only.
 */
import { X509Certificate } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generate } from 'selfsigned'

const DAY_MS = 24 * 60 * 60 * 1000
const CA_DAYS = 3650
const LEAF_DAYS = 397
const RENEW_BEFORE_MS = 30 * DAY_MS

export interface Leaf {
  usage: 'server' | 'client'
  name: string
}

interface Pem {
  cert: string
  key: string
}

/** `server:agency-service` → a server certificate for agency-service. */
export function parseLeaf(argument: string): Leaf {
  const match = /^(server|client):([a-z][a-z0-9-]{0,62})$/.exec(argument)
  if (match === null) throw new Error(`not server:<name> or client:<name>: ${JSON.stringify(argument)}`)
  return { usage: match[1] as Leaf['usage'], name: match[2]! }
}

function writeAtomically(file: string, text: string, mode: number): void {
  writeFileSync(`${file}.new`, text, { mode })
  renameSync(`${file}.new`, file)
}

/** The certificate and key in `dir` under these names, if both are there, parse, and stay valid past the renewal margin. */
function readUsable(dir: string, certName: string, keyName: string, now: Date, issuer?: X509Certificate): Pem | undefined {
  const certFile = join(dir, certName)
  const keyFile = join(dir, keyName)
  if (!existsSync(certFile) || !existsSync(keyFile)) return undefined
  try {
    const cert = readFileSync(certFile, 'utf8')
    const parsed = new X509Certificate(cert)
    if (new Date(parsed.validTo).getTime() - now.getTime() < RENEW_BEFORE_MS) return undefined
    if (issuer !== undefined && !parsed.verify(issuer.publicKey)) return undefined
    return { cert, key: readFileSync(keyFile, 'utf8') }
  } catch {
    return undefined
  }
}

function validity(now: Date, days: number): { notBeforeDate: Date; notAfterDate: Date } {
  return { notBeforeDate: new Date(now.getTime() - 60_000), notAfterDate: new Date(now.getTime() + days * DAY_MS) }
}

async function makeCa(now: Date): Promise<Pem> {
  const pems = await generate([{ name: 'commonName', value: 'scoped-api internal CA' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    ...validity(now, CA_DAYS),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  })
  return { cert: pems.cert, key: pems.private }
}

async function makeLeaf(ca: Pem, leaf: Leaf, now: Date): Promise<Pem> {
  const pems = await generate([{ name: 'commonName', value: leaf.name }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    ...validity(now, LEAF_DAYS),
    ca: { key: ca.key, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      leaf.usage === 'server' ? { name: 'extKeyUsage', serverAuth: true } : { name: 'extKeyUsage', clientAuth: true },
      ...(leaf.usage === 'server' ? [{ name: 'subjectAltName' as const, altNames: [{ type: 2 as const, value: leaf.name }] }] : []),
    ],
  })
  return { cert: pems.cert, key: pems.private }
}

/** Makes (or keeps) the CA and every leaf under `dir`; returns what was made anew, for the log. */
export async function makeInternalCertificates(dir: string, leaves: readonly Leaf[], now = new Date()): Promise<string[]> {
  const made: string[] = []
  const caDir = join(dir, 'ca')
  mkdirSync(caDir, { recursive: true })
  let ca = readUsable(caDir, 'ca.crt', 'ca.key', now)
  if (ca === undefined) {
    ca = await makeCa(now)
    writeAtomically(join(caDir, 'ca.key'), ca.key, 0o600)
    writeAtomically(join(caDir, 'ca.crt'), ca.cert, 0o644)
    made.push('ca')
  }
  const issuer = new X509Certificate(ca.cert)
  for (const leaf of leaves) {
    const leafDir = join(dir, leaf.name)
    mkdirSync(leafDir, { recursive: true })
    if (readUsable(leafDir, 'tls.crt', 'tls.key', now, issuer) === undefined) {
      const pem = await makeLeaf(ca, leaf, now)
      writeAtomically(join(leafDir, 'tls.key'), pem.key, 0o600)
      writeAtomically(join(leafDir, 'tls.crt'), pem.cert, 0o644)
      made.push(`${leaf.usage}:${leaf.name}`)
    }
    writeAtomically(join(leafDir, 'ca.crt'), ca.cert, 0o644)
  }
  return made
}

async function main(): Promise<void> {
  const [dir, ...rest] = process.argv.slice(2)
  if (dir === undefined || rest.length === 0) throw new Error('usage: internal-certificates <dir> server:<name>… client:<name>…')
  const made = await makeInternalCertificates(dir, rest.map(parseLeaf))
  process.stdout.write(`internal certificates under ${dir}: ${made.length === 0 ? 'all still valid' : `made ${made.join(', ')}`}\n`)
}

if (process.argv[1] !== undefined && /internal-certificates\.[jt]s$/.test(process.argv[1])) {
  main().catch((error: unknown) => {
    process.stderr.write(`internal-certificates: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  })
}
