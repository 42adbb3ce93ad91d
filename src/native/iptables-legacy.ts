// Typed API of the addon's iptables-legacy part (native/iptables_legacy.cc: x_tables through
// get/setsockopt on a raw socket, in a worker thread). Only the clean-up of upstream kube-proxy's
// iptables-legacy rules uses it; kpng itself makes no x_tables rule.
import { loadNative } from './index';
import type { NativeCallOptions } from './nft-types';

/** 4: iptables (ip_tables), 6: ip6tables (ip6_tables). */
export type IptFamily = 4 | 6;

export interface IptLegacyChain {
  name: string;
  /** PREROUTING, INPUT, ...: a hook's chain (its policy is not counted as a rule). */
  builtin: boolean;
  /** Rules in the chain (a user chain's head and RETURN entries, a builtin's policy not counted). */
  rules: number;
}

/** A rule whose verdict jumps (-j) or goes (-g) to another chain of the table. */
export interface IptLegacyJump {
  chain: string;
  target: string;
  /** The rule's number in its chain, from 1 (as `iptables -L --line-numbers`), when it was read. */
  index: number;
  goto: boolean;
}

export interface IptLegacyListing { chains: IptLegacyChain[]; jumps: IptLegacyJump[] }

export interface IptLegacyRemoveResult {
  /** The user chains removed (those of the names that were there). */
  chains: string[];
  /** The rules of other chains that jumped to them, removed too. */
  jumps: IptLegacyJump[];
  /** false: the rules went but the kept rules' packet counters restart at zero. */
  countersRestored: boolean;
  /** Reads of the table (more than 1: it changed under us, EAGAIN). */
  attempts: number;
}

interface IptLegacyNative {
  iptLegacyTables(family: IptFamily, netns?: string): Promise<string[] | null>;
  iptLegacyList(family: IptFamily, table: string, netns?: string): Promise<IptLegacyListing>;
  iptLegacyRemoveChains(family: IptFamily, table: string, chains: string[], netns?: string): Promise<IptLegacyRemoveResult>;
}
const addon = () => loadNative() as unknown as IptLegacyNative;

const TABLE_NAME = /^[\x21-\x7e]{1,31}$/;
const CHAIN_NAME = /^[\x21-\x7e]{1,29}$/;

function checkFamily(family: IptFamily): void {
  if (family !== 4 && family !== 6) throw new RangeError(`family: 4 or 6, got ${JSON.stringify(family)}`);
}
function checkTable(table: string): void {
  if (!TABLE_NAME.test(table)) throw new RangeError(`bad x_tables table name ${JSON.stringify(table)}`);
}

/**
 * The legacy x_tables tables present (instantiated) in the namespace: /proc/net/ip_tables_names or
 * ip6_tables_names. null when that file does not exist: this kernel has no legacy x_tables for the
 * family (ip_tables not loaded), so there is nothing to list.
 */
export async function iptLegacyTables(family: IptFamily, call?: NativeCallOptions): Promise<string[] | null> {
  checkFamily(family);
  return addon().iptLegacyTables(family, call?.netns);
}

/** One table's chains and jumps between chains. ENOENT when the table is not present (never instantiated). */
export async function iptLegacyList(family: IptFamily, table: string, call?: NativeCallOptions): Promise<IptLegacyListing> {
  checkFamily(family);
  checkTable(table);
  return addon().iptLegacyList(family, table, call?.netns);
}

/**
 * Removes the named user chains (builtin names are ignored, absent ones skipped) and every rule of
 * the other chains that jumps or goes to them, as ONE replace of the table; keeps the other rules'
 * counters. Removing nothing writes nothing. ENOENT when the table is not present.
 */
export async function iptLegacyRemoveChains(family: IptFamily, table: string, chains: string[], call?: NativeCallOptions): Promise<IptLegacyRemoveResult> {
  checkFamily(family);
  checkTable(table);
  for (const c of chains) if (!CHAIN_NAME.test(c)) throw new RangeError(`bad x_tables chain name ${JSON.stringify(c)}`);
  if (chains.length === 0) return { chains: [], jumps: [], countersRestored: true, attempts: 0 };
  return addon().iptLegacyRemoveChains(family, table, chains, call?.netns);
}
