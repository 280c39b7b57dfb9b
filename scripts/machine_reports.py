"""Reads `trverify --dtypes ... --json` reports of rules/xla for scripts/xla-machine-table and
scripts/xla-corpus-table: several reports (e.g. one at ints,f32,f64 and one at f16,bf16 with a
larger --budget) are merged rule by rule, each rule's types from every report."""
import json


def merge(paths):
    """One report from several: per rule (file, name) the union of the dtypes; the counterexample of
    the first report that has one; the rules skipped by a report and checked by none."""
    merged, by_key, skipped = {'rules': [], 'skipped': []}, {}, {}
    for path in paths:
        with open(path) as f:
            rep = json.load(f)
        for r in rep['rules']:
            key = (r['file'], r['name'])
            if key not in by_key:
                by_key[key] = dict(r, dtypes=dict(r['dtypes']))
                merged['rules'].append(by_key[key])
                continue
            m = by_key[key]
            for t, v in r['dtypes'].items():
                m['dtypes'].setdefault(t, v)
            if not m.get('counterexample') and r.get('counterexample'):
                m['counterexample'] = r['counterexample']
        for s in rep.get('skipped', []):
            skipped.setdefault((s.get('file'), s['name']), s)
    # a rule that another report checked (at its other types) is not skipped
    merged['skipped'] = [s for k, s in skipped.items() if k not in by_key]
    return merged
