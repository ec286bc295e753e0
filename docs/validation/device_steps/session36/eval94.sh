# L1 94's reduction (8-GB inputs): this tree and the tree before the session, alternated
set -u
D=build/steps/diag/s36
export XDG_CACHE_HOME=$PWD/build/xdg_s36 TRITON_CACHE_DIR=$PWD/build/triton_s36
OLDPP=$(ls -d $PWD/build/old/*/src | tr "\n" ":")
for tag in new1 old1 new2 old2; do
  case $tag in old*) PP=$OLDPP${PYTHONPATH:-};; *) PP=${PYTHONPATH:-};; esac
  PYTHONPATH=$PP timeout 45 kernelpro eval $D/p94.py $D/c94.py --device cuda --json -c $D/eval.yaml --workdir build/wd_${tag}_94 > $OUT/e_${tag}_94.json 2> $OUT/e_${tag}_94.err
  python3 -c "
import json,sys; r=json.load(open('$OUT/e_${tag}_94.json')); m=r['result']['measurements']['evaluator']
t=r['result']['timing']; b=r['result']['baseline']
print('$tag', r['verdict'], 'cand %.3f n=%d ref %.3f n=%d' % (t['median_ms'], t['n'], b['median_ms'], b['n']), {k[6:-2]: round(v, 2) for k, v in m.items() if k.startswith('stage_')})"
done
