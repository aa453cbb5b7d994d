"""How much a reader must hold: the package's longest files and functions, the places that
ask whether the data is Brown, and what `import nplm.config` loads.

  python -m experiments.code_shape [--checkout=DIR]
"""

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

IMPORT_CHECK = ("import nplm.config, sys; print(sorted(m for m in sys.modules "
                "if m.split('.')[0] in ('flax', 'tensorflow_datasets')))")


def functions(tree: ast.AST):
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      yield node.name, node.end_lineno - node.lineno + 1


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--checkout', default=str(Path(__file__).resolve().parents[1]))
  checkout = Path(parser.parse_args().checkout).resolve()
  package = checkout / 'nplm'
  sources = sorted(package.rglob('*.py'))
  lines = {path: len(path.read_text().splitlines()) for path in sources}
  longest_functions = sorted(
      ((length, f'{path.relative_to(checkout)}:{name}') for path in sources
       for name, length in functions(ast.parse(path.read_text()))), reverse=True)
  brown_sites = [f'{path.relative_to(checkout)}:{number}' for path in sources
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r'\bis_brown\(', line) and not line.lstrip().startswith('def ')]
  imported = subprocess.run([sys.executable, '-c', IMPORT_CHECK], cwd=checkout,
                            capture_output=True, text=True).stdout.strip()
  print(f'modules: {len(sources)}, {len(list(package.glob("*.py")))} directly under nplm/')
  print('longest files: ' + ', '.join(f'{path.relative_to(checkout)} {n}' for path, n in
                                      sorted(lines.items(), key=lambda item: -item[1])[:3]))
  print('files over 400 lines: '
        + str(sum(n > 400 for n in lines.values())))
  print('longest functions: ' + ', '.join(f'{name} {n}' for n, name in longest_functions[:3]))
  print(f'is_brown( call sites: {len(brown_sites)} ({", ".join(brown_sites)})')
  print(f'import nplm.config loads: {imported[:200]}{"…" if len(imported) > 200 else ""} '
        f'({imported.count(chr(39)) // 2} modules)')


if __name__ == '__main__':
  main()
