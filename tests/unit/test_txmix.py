"""Seed 002's request matrix and protocol mix as data."""

import pytest

from fwlab.runners import txmix


def test_matrix_rows_sum_to_one_and_eight_clients():
    assert txmix.N_CLIENTS == 8 and txmix.N_SERVERS == 6
    for _, _, shares in txmix.MATRIX:
        assert sum(shares) == pytest.approx(1.0)


def test_spread_round_robin():
    assert txmix.spread(1, 8) == [1, 0, 0, 0, 0, 0, 0, 0]
    assert txmix.spread(12, 8) == [2, 2, 2, 2, 1, 1, 1, 1]
    assert sum(txmix.spread(72, 8)) == 72 and set(txmix.spread(72, 8)) == {9}


def test_cycle_follows_tables_7_and_8():
    reqs = txmix.matrix_cycle(0, [1000, 16000, 64000], ftp=True, seed=3)
    sh = txmix.mix_shares(reqs)
    assert sh["server01"] == pytest.approx(0.024, abs=0.002)
    assert sh["server03"] == pytest.approx(0.238, abs=0.002)
    # client01-05: 4.8 % to 01/02 and 95.2 % to 03-06; FTP = .024*.1+.024*.9+2*.238*.1+2*.238*.9
    assert sh["ftp"] == pytest.approx(0.024 + 0.476, abs=0.003)
    b = txmix.mix_shares(txmix.matrix_cycle(7, [1000], ftp=True, seed=3))
    assert b["server01"] == pytest.approx(0.40, abs=0.002) and b["server06"] == pytest.approx(0.05, abs=0.002)
    assert txmix.client_group(4)[0] == "client01-05" and txmix.client_group(5)[0] == "client06-08"
    with pytest.raises(ValueError):
        txmix.client_group(8)


def test_http_only_keeps_server_shares_and_is_seeded():
    a = txmix.matrix_cycle(2, [1000], ftp=False, seed=1)
    assert {r.protocol for r in a} == {"http"}
    assert txmix.mix_shares(a)["server04"] == pytest.approx(0.238, abs=0.002)
    assert a == txmix.matrix_cycle(2, [1000], ftp=False, seed=1)
    assert a != txmix.matrix_cycle(2, [1000], ftp=False, seed=2)


def test_addresses_and_names():
    assert txmix.nth_address("198.19.1.1", 2) == "198.19.1.33"
    assert txmix.nth_address("2001:2:0:2::1", 1) == "2001:2:0:2::11"
    assert txmix.server_host(0) == "srv01.fwlab.test"
