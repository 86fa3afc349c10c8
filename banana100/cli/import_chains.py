"""`banana100 import-chains`: turn a folder of chain images into a run folder."""

from __future__ import annotations

from pathlib import Path

from banana100.cli.common import command, COUNT


def add_parser(sub) -> None:
    ic = command(sub, "import-chains", "turn a folder of chain images into a run folder with a manifest")
    ic.add_argument("folder", type=Path, help="folder holding the chain images")
    ic.add_argument("--pattern", required=True,
                    help="file path template, e.g. '{chain}/step_{step:03d}.png' or '{setting}/{source}_r{repeat}/{step}.png'"
                         " (fields: chain, source, setting, repeat, step, model, chat, variant), or 're:REGEX' with named"
                         " groups (required)")
    ic.add_argument("--out", required=True, type=Path, help="run folder to write (required; rerun to resume)")
    ic.add_argument("--setting", default="replicate", help="setting when the pattern has no {setting}")
    ic.add_argument("--repeat", type=COUNT, default=0, help="repeat when the pattern has no {repeat}")
    ic.add_argument("--model", default="unknown", help="editor model id when the pattern has no {model}")
    ic.add_argument("--chat-mode", default=None, help="same or different, when the pattern has no {chat} "
                    "(default: none recorded, read as the paper's different chat)")
    ic.add_argument("--variant", default=None, help="variant label of every chain, when the pattern has no {variant} (default: none)")
    ic.add_argument("--prompt", default=None, help="prompt of every edit (default: the setting's, when known)")
    ic.add_argument("--link", action="store_true", help="hard-link the images instead of copying them")
    ic.set_defaults(func=run)


def run(args) -> None:
    from banana100.chains.importer import import_chains

    summary = import_chains(args.folder, args.pattern, args.out, setting=args.setting, repeat=args.repeat,
                            model=args.model, prompt=args.prompt, link=args.link, chat_mode=args.chat_mode,
                            variant=args.variant)
    print(summary)
