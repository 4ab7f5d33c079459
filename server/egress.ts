/**
 * Hardened outbound HTTPS (webhook deliveries): only public HTTPS destinations, checked at every call.
 * The policy (address and name rules: egress/policy.ts), the environment (the operator's relaxations
 * for local test receivers, off by default: egress/environment.ts) and the client the service owns
 * and closes at shutdown (`ModuleDeps.egress`: egress/client.ts).
 */
export { EgressClient, type GetInit, type PostInit, type PostOutcome } from './egress/client.ts';
export { egressPolicyFromEnv, relaxations } from './egress/environment.ts';
export {
  type AddressVerdict,
  checkDestination,
  classifyAddress,
  type EgressPolicy,
  EgressRefused,
  type EgressRefusalReason,
  type LookupAll,
  resolveDestination,
  STRICT_EGRESS_POLICY,
  systemLookup,
} from './egress/policy.ts';
