/**
 * Reading the deployment files for the invariant tests: YAML (multi-document,
 * merge keys), the kustomize base, the Dockerfile's instructions, and the
 * label-selector rule Kubernetes applies. Only the fields the tests look at
 * are typed.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { projectRoot } from '../helpers/processes.js'

export const kubernetesDir = join(projectRoot, 'deploy', 'kubernetes')

export function readProjectFile(relativePath: string): string {
  return readFileSync(join(projectRoot, relativePath), 'utf8')
}

/** Every document of a YAML file; a syntax error (or a duplicate key) fails loudly. */
export function parseYamlDocuments(text: string, source: string): unknown[] {
  return parseAllDocuments(text, { merge: true, uniqueKeys: true }).map((document) => {
    if (document.errors.length > 0) throw new Error(`${source}: ${document.errors.map((error) => error.message).join('; ')}`)
    return document.toJS() as unknown
  })
}

export function parseYamlDocument(text: string, source: string): unknown {
  const documents = parseYamlDocuments(text, source)
  if (documents.length !== 1) throw new Error(`${source}: expected one YAML document, found ${documents.length}`)
  return documents[0]
}

export type Labels = Record<string, string>

export interface LabelSelector {
  matchLabels?: Labels
  matchExpressions?: unknown[]
}

/** A selector with only matchLabels selects the pods that carry every one of its labels. */
export function selects(selector: LabelSelector | undefined, podLabels: Labels | undefined): boolean {
  if (selector?.matchExpressions !== undefined) throw new Error('matchExpressions are not used in these manifests')
  const wanted = Object.entries(selector?.matchLabels ?? {})
  if (wanted.length === 0) throw new Error('an empty selector would select every pod')
  return wanted.every(([name, value]) => podLabels?.[name] === value)
}

export interface EnvVar {
  name: string
  value?: string
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean }
    configMapKeyRef?: { name: string; key: string }
  }
}

export interface HttpProbe {
  httpGet?: { path: string; port: number | string }
}

export interface ContainerSecurityContext {
  runAsNonRoot?: boolean
  runAsUser?: number
  allowPrivilegeEscalation?: boolean
  readOnlyRootFilesystem?: boolean
  privileged?: boolean
  capabilities?: { drop?: string[]; add?: string[] }
}

export interface Container {
  name: string
  image: string
  command?: string[]
  args?: string[]
  ports?: Array<{ name?: string; containerPort: number }>
  env?: EnvVar[]
  envFrom?: unknown[]
  livenessProbe?: HttpProbe
  readinessProbe?: HttpProbe
  startupProbe?: HttpProbe
  resources?: { requests?: { cpu?: string; memory?: string }; limits?: { cpu?: string; memory?: string } }
  securityContext?: ContainerSecurityContext
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>
}

export interface Volume {
  name: string
  configMap?: { name: string }
  secret?: { secretName: string }
  emptyDir?: unknown
}

export interface PodSpec {
  containers: Container[]
  initContainers?: Container[]
  volumes?: Volume[]
  automountServiceAccountToken?: boolean
  hostNetwork?: boolean
  hostPID?: boolean
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number }
}

export interface PodTemplate {
  metadata: { labels?: Labels }
  spec: PodSpec
}

export interface Manifest {
  apiVersion: string
  kind: string
  metadata: { name: string; labels?: Labels }
  spec?: unknown
}

export interface Deployment extends Manifest {
  kind: 'Deployment'
  spec: { replicas?: number; selector: LabelSelector; template: PodTemplate }
}

export interface Job extends Manifest {
  kind: 'Job'
  spec: { template: PodTemplate }
}

export interface Service extends Manifest {
  kind: 'Service'
  spec: { selector: Labels; ports: Array<{ name?: string; port: number; targetPort?: number | string }> }
}

export interface NetworkPolicyPeer {
  podSelector?: LabelSelector
  namespaceSelector?: LabelSelector
  ipBlock?: unknown
}

export interface NetworkPolicy extends Manifest {
  kind: 'NetworkPolicy'
  spec: {
    podSelector: LabelSelector
    policyTypes?: string[]
    ingress?: Array<{ from?: NetworkPolicyPeer[]; ports?: Array<{ port: number | string; protocol?: string }> }>
  }
}

export interface HorizontalPodAutoscaler extends Manifest {
  kind: 'HorizontalPodAutoscaler'
  spec: { scaleTargetRef: { apiVersion: string; kind: string; name: string }; minReplicas?: number; maxReplicas: number }
}

export interface PodDisruptionBudget extends Manifest {
  kind: 'PodDisruptionBudget'
  spec: { selector: LabelSelector; minAvailable?: number | string; maxUnavailable?: number | string }
}

export interface Kustomization {
  resources?: string[]
  configMapGenerator?: Array<{ name: string; files?: string[] }>
  secretGenerator?: unknown[]
}

export function isManifest(value: unknown): value is Manifest {
  return typeof value === 'object' && value !== null && 'kind' in value && 'metadata' in value
}

/** The port number a probe or Service targets: a number, or the name of one of the container's ports. */
export function resolvePort(port: number | string | undefined, containers: Container[]): number | undefined {
  if (typeof port === 'number') return port
  if (port === undefined) return undefined
  for (const container of containers) {
    const named = container.ports?.find((candidate) => candidate.name === port)
    if (named !== undefined) return named.containerPort
  }
  return undefined
}

export interface DockerInstruction {
  stage: number
  keyword: string
  argument: string
}

/** The Dockerfile's instructions, with line continuations joined and comments dropped. */
export function parseDockerfile(text: string): DockerInstruction[] {
  const logicalLines: string[] = []
  let pending = ''
  for (const line of text.split('\n')) {
    if (pending === '' && /^\s*#/.test(line)) continue
    if (line.trimEnd().endsWith('\\')) {
      pending += `${line.trimEnd().slice(0, -1)} `
      continue
    }
    logicalLines.push(pending + line)
    pending = ''
  }
  let stage = -1
  const instructions: DockerInstruction[] = []
  for (const line of logicalLines) {
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line)
    if (match === null) continue
    const keyword = match[1]!.toUpperCase()
    if (keyword === 'FROM') stage += 1
    instructions.push({ stage, keyword, argument: match[2]!.trim().replace(/\s+/g, ' ') })
  }
  return instructions
}
