"""save"""
