"""A job's ``runtime_env.pip`` entries (clusters/kinds/rayjob/pip_requirements.py): each exactly
one PEP 508 requirement, read the way pip reads a requirements file, so that no entry
can choose the package index, pass pip options or reach files, URLs or variables."""

from __future__ import annotations

import pytest

from clusters.kinds.rayjob.pip_requirements import (
    DIRECT_URL,
    DIRECT_URL_SCHEME,
    MAX_REQUIREMENT,
    NOT_A_REQUIREMENT,
    PIP_OPTION,
    requirement_fault,
)
from clusters.kinds.rayjob.runtime_env import validate_runtime_env

FINE = [
    "torch",
    "torch==2.4.0",
    "torch>=2.3,<3",
    "ray[default]==2.49.2",
    "ray[default,tune] >= 2.9",
    "datasets~=2.19",
    "numpy!=1.26.0",
    'numpy; python_version < "3.11"',
    "pywin32 >= 306 ; sys_platform == 'win32'",
    'flash-attn==2.6.3; platform_machine == "x86_64" and python_version >= "3.10"',
    "zope.interface",
    "  padded==1.0  ",
]

OPTIONS = [
    "--index-url https://evil.example/simple",
    "--index-url=https://evil.example/simple",
    "torch --index-url https://evil.example/simple",
    "torch==2.4.0 --extra-index-url https://evil.example/simple",
    "--extra-index-url=https://evil.example/simple",
    "-i https://evil.example/simple",
    "-ihttps://evil.example/simple",
    "torch -i https://evil.example/simple",
    "--trusted-host evil.example",
    "torch --trusted-host=evil.example",
    "-f https://evil.example/wheels/",
    "--find-links=/tmp/wheels",
    "-r requirements.txt",
    "-r/etc/passwd",
    "--requirement=other.txt",
    "-c constraints.txt",
    "--constraint constraints.txt",
    "-e git+https://evil.example/x.git#egg=x",
    "--editable=./src",
    "--pre",
    "torch --pre",
    "torch --no-deps",
    "torch --global-option=--build-option",
    "torch --config-settings=--build-option=x",
    "torch==2.4.0 --hash=sha256:" + "0" * 64,
    "torch;--index-url=https://evil.example/simple",
    "torch,--pre",
    "\u2014index-url https://evil.example/simple",  # em dash
    "\u2013i https://evil.example/simple",  # en dash
    "torch \u2212\u2212index-url x",  # minus signs
    "\uff0d\uff0dpre",  # fullwidth hyphen-minus
]

DIRECT = [
    "evil @ https://evil.example/e.whl",
    "evil@https://evil.example/e.whl",
    'evil @ https://evil.example/e.whl ; python_version >= "3"',
    "evil @ file:///tmp/evil.whl",
    "evil @ git+https://evil.example/evil.git",
    "evil @ git+ssh://git@evil.example/evil.git",
    "evil @ hg+https://evil.example/evil",
    "evil @ svn+https://evil.example/evil",
    "evil @ bzr+https://evil.example/evil",
    "evil @ http://evil.example/e.whl",
]

NOT_REQUIREMENTS = [
    "https://evil.example/e.whl",
    "http://evil.example/e.tar.gz",
    "git+https://evil.example/evil.git",
    "git+https://evil.example/evil.git#egg=evil",
    "file:///tmp/evil.whl",
    "./pkg",
    "../pkg",
    "/tmp/x.whl",
    "~/pkg",
    "C:\\pkg\\x.whl",
    "pkg.whl",
    "evil.tar.gz",
    "evil[x].zip",
    "torch\n--index-url https://evil.example/simple",
    "torch\r--index-url https://evil.example/simple",
    "torch\r\n--index-url=https://evil.example/simple",
    "torch\nevil",
    "torch\x00evil",
    "torch\u2028evil",  # a line separator: str.splitlines (and so pip) breaks here
    "torch\x0bevil",
    "torch\x85evil",
    "torch\tevil",
    "torch # comment",
    "# just a comment",
    "#--index-url https://evil.example/simple",
    "torch \\",
    "torch==2.4.0 \\",
    "evil @ https://${AWS_SECRET_ACCESS_KEY}@evil.example/e.whl",
    "torch==${VERSION}",
    "torch evil",
    "torch==2.4.0--index-url=x",
    "torch[--pre]",
    "t\u043erch",  # Cyrillic o
    "\u200btorch",  # zero-width space
    "",
    "   ",
    "a" * (MAX_REQUIREMENT + 1),
]


@pytest.mark.parametrize("entry", FINE)
def test_a_requirement_passes(entry: str) -> None:
    assert requirement_fault(entry) == ""
    clean, errors = validate_runtime_env({"pip": [entry]})
    assert errors == {} and clean == {"pip": [entry.strip()]}


@pytest.mark.parametrize("entry", OPTIONS)
@pytest.mark.parametrize("allow_direct_urls", [False, True], ids=["default", "urls-allowed"])
def test_pip_options_are_refused_whatever_the_policy(entry: str, allow_direct_urls: bool) -> None:
    assert requirement_fault(entry, allow_direct_urls=allow_direct_urls) == PIP_OPTION


@pytest.mark.parametrize("entry", DIRECT)
def test_direct_urls_are_refused_by_default(entry: str) -> None:
    assert requirement_fault(entry) == DIRECT_URL


@pytest.mark.parametrize("entry", DIRECT)
def test_a_policy_allowing_direct_urls_lets_only_https_through(entry: str) -> None:
    expected = "" if entry.split("@", 1)[1].strip().startswith("https://") else DIRECT_URL_SCHEME
    assert requirement_fault(entry, allow_direct_urls=True) == expected


@pytest.mark.parametrize("entry", NOT_REQUIREMENTS)
@pytest.mark.parametrize("allow_direct_urls", [False, True], ids=["default", "urls-allowed"])
def test_what_is_not_one_requirement_is_refused(entry: str, allow_direct_urls: bool) -> None:
    fault = requirement_fault(entry, allow_direct_urls=allow_direct_urls)
    assert fault.startswith(f"{NOT_A_REQUIREMENT}: ") or fault == PIP_OPTION, fault


def test_the_fault_names_each_entry_and_why() -> None:
    entries = ["torch==2.4.0", "torch --index-url https://evil.example/simple", "evil\nx"]
    entries.append("evil @ https://evil.example/e.whl")
    clean, errors = validate_runtime_env({"pip": entries})
    assert clean == {}
    assert errors == {
        "runtime_env.pip": [
            f"'torch --index-url https://evil.example/simple': {PIP_OPTION}.",
            f"'evil\\nx': {NOT_A_REQUIREMENT}: one requirement per entry, without line "
            "breaks, tabs, control or non-ASCII characters.",
            f"'evil @ https://evil.example/e.whl': {DIRECT_URL}.",
        ]
    }


def test_many_faults_are_cut_short() -> None:
    _, errors = validate_runtime_env({"pip": [f"-r r{n}.txt" for n in range(15)]})
    faults = errors["runtime_env.pip"]
    assert len(faults) == 11 and faults[-1] == "... and 5 more."


def test_the_dict_form_keeps_pip_check_and_refuses_pip_options() -> None:
    clean, errors = validate_runtime_env({"pip": {"packages": ["torch"], "pip_check": False}})
    assert errors == {} and clean == {"pip": {"packages": ["torch"], "pip_check": False}}
    for value, words in [
        ({"packages": ["torch"], "pip_install_options": ["--index-url=x"]}, "pip_install_options"),
        ({"packages": ["torch"], "pip_version": "==22.0;--pre"}, "pip_version"),
        ({"packages": ["torch"], "pip_check": "yes"}, "true or false"),
        ({"packages": ["-r x.txt"]}, PIP_OPTION),
        ({"pip_check": True}, "list of requirement strings"),
    ]:
        clean, errors = validate_runtime_env({"pip": value})
        (fault,) = errors["runtime_env.pip"]
        assert words in fault and clean == {}, (value, fault)


def test_a_policy_never_lets_a_url_through_the_dict_form_without_it() -> None:
    value = {"pip": {"packages": ["evil @ https://evil.example/e.whl"]}}
    assert validate_runtime_env(value)[1] == {
        "runtime_env.pip": [f"'evil @ https://evil.example/e.whl': {DIRECT_URL}."]
    }
    clean, errors = validate_runtime_env(value, allow_pip_direct_urls=True)
    assert errors == {} and clean == value
